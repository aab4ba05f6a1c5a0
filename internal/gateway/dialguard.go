package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// metadataAddrs are cloud instance-metadata endpoints outside the
// link-local ranges.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
}

// RefuseLinkLocal is a net.Dialer Control function that refuses to connect
// to link-local and cloud metadata addresses. The admin API refuses such
// literal base URLs; this catches a host name that resolves to one at
// dial time (DNS rebinding included), because Control sees the address
// actually being dialled.
func RefuseLinkLocal(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil // not an IP address: nothing to judge
	}
	ip := ap.Addr().Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || metadataAddrs[ip] {
		return fmt.Errorf("refusing to dial %s: link-local and cloud metadata addresses are not upstreams (see --allow-link-local-upstreams)", ip)
	}
	return nil
}

// newDialer returns the upstream dialer; without allowLinkLocal it refuses
// link-local and metadata addresses.
func newDialer(allowLinkLocal bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowLinkLocal {
		d.Control = RefuseLinkLocal
	}
	return d
}
