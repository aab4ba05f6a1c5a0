//go:build !linux

package h1client

import "net"

// alive cannot peek without blocking here: a pooled connection the server
// closed fails its next request instead.
func alive(net.Conn) bool { return true }

// waitReadable cannot wait without reading here: the caller just reads.
func waitReadable(net.Conn) {}
