// Package netguard is rolter's one list of addresses an upstream may not
// be. The admin API judges literal base URLs and host IPs with it, and the
// gateway's, the probes' and the fleet controller's dialers check every
// address they connect to, so a name that resolves there is refused too.
//
// Two classes are refused:
//
//   - link-local ranges and cloud instance-metadata endpoints (Refused),
//     unless the operator opts in with --allow-link-local-upstreams;
//   - the unspecified addresses 0.0.0.0 and :: (Unspecified), always: as a
//     destination they mean "this host" on most systems, which is never
//     what an upstream address is meant to say.
//
// An IPv6 address that carries an IPv4 one is judged by the IPv4 address
// too: IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d),
// IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96, and the local-use
// 64:ff9b:1::/48 in every RFC 6052 layout that fits in it), since a NAT64
// gateway or a dual-stack kernel delivers them to the IPv4 address. 6to4
// and Teredo addresses are not decoded: they reach a relay, not the IPv4
// address they embed.
//
// Host names are judged as a resolver looks them up (Host): IDNA (UTS #46)
// mapping turns fullwidth and ideographic dots (U+FF0E, U+3002, U+FF61) into
// "." and fullwidth digits into ASCII, as Go's HTTP client does before it
// dials, so 169。254。169。254 is 169.254.169.254.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"
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

// Prefixes of IPv6 addresses that carry an IPv4 address (see Embedded).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	v4Compatible   = netip.MustParsePrefix("::/96")           // RFC 4291 2.5.5.1, deprecated
	v4Translated   = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 (SIIT)
)

// Host returns host as a resolver will look it up: IDNA-mapped (only when
// it is not ASCII, as Go's HTTP client does), lower case, without a
// trailing dot or IPv6 brackets. It fails for a name IDNA refuses, which no
// resolver Go uses would look up either.
func Host(host string) (string, error) {
	h := host
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			a, err := idna.Lookup.ToASCII(h)
			if err != nil {
				return "", fmt.Errorf("%q is not a valid host name: %w", host, err)
			}
			h = a
			break
		}
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), nil
}

// MetadataName reports whether host (any case, trailing dot allowed, any
// IDNA spelling) is a cloud metadata endpoint's name.
func MetadataName(host string) bool {
	h, err := Host(host)
	return err == nil && metadataNames[h]
}

// Embedded returns the IPv4 addresses an IPv6 address carries (see the
// package doc), without allocating; n is how many of the array are set.
// An IPv4 address carries nothing, and neither do :: and ::1. For the NAT64
// local-use prefix it returns one address per RFC 6052 layout, because the
// operator's prefix length is not known here: only one of them is meant,
// so judge them with "any is refused", never "all are fine".
func Embedded(ip netip.Addr) (v4 [4]netip.Addr, n int) {
	if !ip.Is6() || ip.IsUnspecified() || ip.IsLoopback() {
		return v4, 0
	}
	ip = ip.WithZone("")
	b := ip.As16()
	addr := func(a, b, c, d byte) { v4[n] = netip.AddrFrom4([4]byte{a, b, c, d}); n++ }
	switch {
	case ip.Is4In6(), nat64WellKnown.Contains(ip), v4Compatible.Contains(ip), v4Translated.Contains(ip):
		addr(b[12], b[13], b[14], b[15])
	case nat64LocalUse.Contains(ip):
		// The operator picks the prefix length inside the /48; RFC 6052
		// puts the IPv4 bits around the zero "u" octet (byte 8) for each.
		addr(b[6], b[7], b[9], b[10])   // /48
		addr(b[7], b[9], b[10], b[11])  // /56
		addr(b[9], b[10], b[11], b[12]) // /64
		addr(b[12], b[13], b[14], b[15])
	}
	return v4, n
}

// MetadataAddr reports whether ip is a cloud metadata endpoint outside the
// link-local ranges, or an IPv6 address carrying one.
func MetadataAddr(ip netip.Addr) bool {
	return anyOf(ip, func(a netip.Addr) bool { return metadataAddrs[a] })
}

// LinkLocal reports whether ip is link-local (unicast or multicast), or an
// IPv6 address carrying a link-local IPv4 address.
func LinkLocal(ip netip.Addr) bool {
	return anyOf(ip, func(a netip.Addr) bool { return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() })
}

// Refused reports whether ip is link-local or a metadata endpoint, directly
// or embedded: the class --allow-link-local-upstreams lets through.
func Refused(ip netip.Addr) bool { return LinkLocal(ip) || MetadataAddr(ip) }

// Unspecified reports whether ip is 0.0.0.0 or ::, directly or embedded
// (::ffff:0.0.0.0, 64:ff9b::). It is never an upstream, whatever the
// configuration. The NAT64 local-use prefix is not judged here: its
// layouts other than the operator's decode zeros from any address in it.
func Unspecified(ip netip.Addr) bool {
	if nat64LocalUse.Contains(ip.WithZone("")) {
		return false
	}
	return anyOf(ip, netip.Addr.IsUnspecified)
}

// anyOf reports whether is holds for ip (zone dropped, IPv4-mapped
// unmapped) or for an IPv4 address it carries.
func anyOf(ip netip.Addr, is func(netip.Addr) bool) bool {
	ip = ip.WithZone("").Unmap()
	if is(ip) {
		return true
	}
	v4, n := Embedded(ip)
	for _, a := range v4[:n] {
		if is(a) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer Control function that refuses to connect to a
// Refused or Unspecified address. Control sees the address actually being
// dialled, so it catches a host name that resolves there (DNS rebinding
// included).
func Control(network, address string, _ syscall.RawConn) error {
	return control(address, false)
}

// controlAllowLinkLocal is Control under --allow-link-local-upstreams: only
// the unspecified addresses are refused.
func controlAllowLinkLocal(network, address string, _ syscall.RawConn) error {
	return control(address, true)
}

func control(address string, allowLinkLocal bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil // not an IP address: nothing to judge
	}
	ip := ap.Addr().Unmap()
	switch {
	case Unspecified(ip):
		return fmt.Errorf("refusing to dial %s: an unspecified address is never an upstream", ip)
	case !allowLinkLocal && Refused(ip):
		return fmt.Errorf("refusing to dial %s: link-local and cloud metadata addresses are not upstreams (see --allow-link-local-upstreams)", ip)
	}
	return nil
}

// Dialer returns the upstream dialer. It refuses the unspecified addresses
// and, unless allowLinkLocal, link-local and metadata addresses.
func Dialer(allowLinkLocal bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: Control}
	if allowLinkLocal {
		d.Control = controlAllowLinkLocal
	}
	return d
}
