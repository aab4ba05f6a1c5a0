package h1client

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// alive peeks at a pooled connection without blocking: false when the
// server closed it (EOF), reset it, or (plain TCP) sent bytes nobody asked
// for. A TLS connection may hold a session ticket the server sent after
// the handshake, so bytes there do not condemn it.
func alive(nc net.Conn) bool {
	raw, isTLS := nc, false
	if tc, ok := nc.(*tls.Conn); ok {
		raw, isTLS = tc.NetConn(), true
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		case err != nil, n == 0:
			ok = false
		case !isTLS:
			ok = false
		}
		return true
	})
	return ok && err == nil
}
