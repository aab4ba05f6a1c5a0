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

// waitReadable blocks until nc has bytes to read, was closed or reset, or
// its read deadline passed, without reading anything and holding no
// buffer. It returns at once when nc cannot be waited on this way (TLS,
// which may hold decrypted bytes of its own, or a connection without a
// descriptor): the caller's read then waits.
func waitReadable(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	if _, isTLS := nc.(*tls.Conn); isTLS {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var b [1]byte
	// rc.Read calls the function again each time the descriptor becomes
	// readable, and returns the deadline's error once it passed: a
	// cancelled request (whose deadline is in the past) is not waited on.
	_ = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EINTR (not expected with MSG_DONTWAIT) lets the read decide
		// rather than wait for an edge that may have passed.
		return !errors.Is(err, syscall.EAGAIN)
	})
}
