// Package netguard is rolter's one list of addresses an upstream may not
// be: link-local ranges and cloud instance-metadata endpoints. The admin
// API judges literal base URLs and host IPs with it, and the gateway's,
// the probes' and the fleet controller's dialers check every address they
// connect to, so a name that resolves there is refused too.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// metadataNames are cloud metadata endpoints by host name.
var metadataNames = map[string]bool{
	"metadata.google.internal": true, // GCP
	"metadata.goog":            true, // GCP
	"metadata":                 true, // GCP short name
}

// metadataAddrs are cloud metadata endpoints outside the link-local ranges
// (169.254.169.254 is link-local).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
}

// MetadataName reports whether host (any case, trailing dot allowed) is a
// cloud metadata endpoint's name.
func MetadataName(host string) bool {
	return metadataNames[strings.TrimSuffix(strings.ToLower(host), ".")]
}

// MetadataAddr reports whether ip is a cloud metadata endpoint outside the
// link-local ranges.
func MetadataAddr(ip netip.Addr) bool { return metadataAddrs[ip.Unmap()] }

// LinkLocal reports whether ip is link-local (unicast or multicast).
func LinkLocal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()
}

// Refused reports whether ip is link-local or a metadata endpoint.
func Refused(ip netip.Addr) bool { return LinkLocal(ip) || MetadataAddr(ip) }

// Control is a net.Dialer Control function that refuses to connect to a
// Refused address. Control sees the address actually being dialled, so it
// catches a host name that resolves there (DNS rebinding included).
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil // not an IP address: nothing to judge
	}
	if ip := ap.Addr().Unmap(); Refused(ip) {
		return fmt.Errorf("refusing to dial %s: link-local and cloud metadata addresses are not upstreams (see --allow-link-local-upstreams)", ip)
	}
	return nil
}

// Dialer returns the upstream dialer; unless allow, it refuses link-local
// and metadata addresses.
func Dialer(allow bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allow {
		d.Control = Control
	}
	return d
}
