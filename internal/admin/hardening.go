package admin

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/rolter/rolter/internal/netguard"
)

// SetAllowLinkLocalUpstreams lets provider base_urls name link-local and
// cloud metadata addresses (default: refused). Private addresses are
// always allowed, because self-hosted backends live there.
func (s *Service) SetAllowLinkLocalUpstreams(allow bool) { s.allowLinkLocal = allow }

// numericLabel matches a host label a C resolver may read as a number
// (decimal, octal, hex), as in http://2852039166/ or http://0xa9fea9fe/.
var numericLabel = regexp.MustCompile(`^(0[xX][0-9a-fA-F]*|[0-9]+)$`)

// UpstreamHostProblem is the admin API's rule for an upstream's host, for
// importers that check a file before writing anything: why host may not be
// an upstream, or "".
func UpstreamHostProblem(host string, allowLinkLocal bool) string {
	return upstreamHostRefusal(host, allowLinkLocal)
}

// upstreamHostRefusal explains why host may not be an upstream, or is "".
// Only literal addresses and well-known names are judged: resolving a name
// here would be defeated by DNS rebinding and would fail for names that
// only resolve where rolter runs (the dialers judge resolved addresses).
// The host is judged as the resolver will see it (netguard.Host: IDNA maps
// 169。254。169。254 to 169.254.169.254). The unspecified addresses are
// refused even when link-local upstreams are allowed.
func upstreamHostRefusal(host string, allowLinkLocal bool) string {
	h, err := netguard.Host(host)
	if err != nil {
		return "is not a valid host name (IDNA)"
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		labels := strings.Split(h, ".")
		numeric := true
		for _, l := range labels {
			numeric = numeric && numericLabel.MatchString(l)
		}
		switch {
		case numeric:
			return "must be a host name or a canonical IP address"
		case !allowLinkLocal && netguard.MetadataName(h):
			return "names a cloud metadata endpoint; refused unless link-local upstreams are allowed"
		}
		return ""
	}
	switch {
	case netguard.Unspecified(ip):
		return "is an unspecified address (0.0.0.0 or ::), which as a destination means this host; give the upstream's own address"
	case allowLinkLocal:
		return ""
	case netguard.MetadataAddr(ip):
		return "names a cloud metadata endpoint; refused unless link-local upstreams are allowed"
	case netguard.LinkLocal(ip):
		return "is a link-local address (e.g. 169.254.169.254, the cloud metadata endpoint); refused unless link-local upstreams are allowed"
	}
	return ""
}
