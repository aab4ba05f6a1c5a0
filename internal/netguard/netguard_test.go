package netguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDialRefusesLinkLocal: whatever name resolved to it, a link-local or
// metadata address is refused before connecting; other addresses pass.
func TestDialRefusesLinkLocal(t *testing.T) {
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:80", "[fe80::1%eth0]:80", "[::ffff:169.254.169.254]:80", "100.100.100.200:80", "[fd00:ec2::254]:80"} {
		if err := Control("tcp", addr, nil); err == nil {
			t.Errorf("%s allowed", addr)
		}
	}
	for _, addr := range []string{"10.0.0.5:8000", "127.0.0.1:1", "[::1]:80", "[2001:db8::1]:80", "192.168.1.1:80", "[64:ff9b::a00:5]:80"} {
		if err := Control("tcp", addr, nil); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	// Through the real dialer: refused at once, without a connect attempt
	// (which would hang on the unroutable address until the timeout).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Dialer(false).DialContext(ctx, "tcp", "169.254.169.254:80")
	if err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Fatalf("dial: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the refusal waited for a connect: %s", time.Since(start))
	}
	if err := Dialer(true).Control("tcp", "169.254.169.254:80", nil); err != nil {
		t.Fatalf("the opt-in still refuses link-local: %v", err)
	}
}

// TestScenario29_RefusedUpstreamAddressesAtDial: the dialer judges the
// address it dials, so an IPv6 spelling of a refused IPv4 address, an
// unspecified address, or a host name spelt with fullwidth or ideographic
// dots (which Go's HTTP client maps with IDNA before dialling) is refused.
func TestScenario29_RefusedUpstreamAddressesAtDial(t *testing.T) {
	linkLocal := []string{
		"[::ffff:169.254.169.254]:80", // IPv4-mapped
		"[64:ff9b::a9fe:a9fe]:80",     // NAT64 well-known prefix
		"[64:ff9b::169.254.169.254]:80",
		"[::a9fe:a9fe]:80",              // IPv4-compatible
		"[::ffff:0:a9fe:a9fe]:80",       // IPv4-translated
		"[64:ff9b:1::a9fe:a9fe]:80",     // NAT64 local-use, /96 layout
		"[64:ff9b:1:a9fe:a9:fe00::]:80", // NAT64 local-use, /48 layout
		"[64:ff9b::6464:64c8]:80",       // Alibaba's 100.100.100.200 through NAT64
	}
	unspecified := []string{"0.0.0.0:80", "[::]:80", "[::ffff:0.0.0.0]:80", "[64:ff9b::]:80"}
	for _, addr := range linkLocal {
		if err := Control("tcp", addr, nil); err == nil || !strings.Contains(err.Error(), "link-local") {
			t.Errorf("%s: %v, want refused as link-local/metadata", addr, err)
		}
		if err := Dialer(true).Control("tcp", addr, nil); err != nil {
			t.Errorf("%s under --allow-link-local-upstreams: %v, want allowed", addr, err)
		}
	}
	for _, addr := range unspecified {
		for _, allow := range []bool{false, true} {
			if err := Dialer(allow).Control("tcp", addr, nil); err == nil || !strings.Contains(err.Error(), "unspecified") {
				t.Errorf("%s (allow link-local %v): %v, want refused as unspecified", addr, allow, err)
			}
		}
	}

	// 0.0.0.0 and :: are no harmless typo: dialled, they reach this host.
	// A real server on loopback proves the refusal happens before connect.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request reached the server: %s %s", r.Method, r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, allow := range []bool{false, true} {
		conn, err := Dialer(allow).DialContext(ctx, "tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
		if err == nil {
			conn.Close()
			t.Fatalf("dial 0.0.0.0:%d (allow link-local %v) connected to the loopback server", port, allow)
		}
	}
	if conn, err := Dialer(false).DialContext(ctx, "tcp", srv.Listener.Addr().String()); err != nil {
		t.Fatalf("the loopback server itself is refused: %v", err)
	} else {
		conn.Close()
	}

	// Fullwidth and ideographic dots, through a real HTTP client: it maps
	// the name to 169.254.169.254, and the dialer refuses that.
	tr := &http.Transport{DialContext: Dialer(false).DialContext, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, u := range []string{
		"http://169。254。169。254/latest/meta-data/",
		"http://169．254．169．254/latest/meta-data/",
		"http://169｡254｡169｡254/latest/meta-data/",
		"http://１６９．２５４．１６９．２５４/latest/meta-data/",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
		"http://[::a9fe:a9fe]/latest/meta-data/",
		"http://0.0.0.0:" + strconv.Itoa(port) + "/",
		"http://[::]:" + strconv.Itoa(port) + "/",
	} {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("GET %s: %s, want refused", u, resp.Status)
			continue
		}
		if !strings.Contains(err.Error(), "refusing to dial") {
			t.Errorf("GET %s: %v, want the dialer's refusal", u, err)
		}
	}
}

// TestEmbeddedEveryForm: every IPv6 spelling of a refused IPv4 address is
// refused, and the same spellings of an allowed one are not.
func TestEmbeddedEveryForm(t *testing.T) {
	forms := func(v4 netip.Addr) map[string]netip.Addr {
		a := v4.As4()
		mk := func(prefix [16]byte, at ...int) netip.Addr {
			for i, j := range at {
				prefix[j] = a[i]
			}
			return netip.AddrFrom16(prefix)
		}
		wkp := [16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b}
		local := [16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 4: 0x00, 5: 0x01}
		mapped := [16]byte{10: 0xff, 11: 0xff}
		translated := [16]byte{8: 0xff, 9: 0xff}
		return map[string]netip.Addr{
			"mapped":       mk(mapped, 12, 13, 14, 15),
			"translated":   mk(translated, 12, 13, 14, 15),
			"compatible":   mk([16]byte{}, 12, 13, 14, 15),
			"nat64":        mk(wkp, 12, 13, 14, 15),
			"nat64 /48":    mk(local, 6, 7, 9, 10),
			"nat64 /56":    mk(local, 7, 9, 10, 11),
			"nat64 /64":    mk(local, 9, 10, 11, 12),
			"nat64 /96":    mk(local, 12, 13, 14, 15),
			"nat64 zone":   mk(wkp, 12, 13, 14, 15).WithZone("eth0"),
			"mapped plain": netip.AddrFrom16(mapped).Unmap(), // 0.0.0.0: the unspecified check's
		}
	}
	for _, v4 := range []string{"169.254.169.254", "169.254.0.1", "100.100.100.200", "224.0.0.251"} {
		ip := netip.MustParseAddr(v4)
		want := Refused(ip)
		for name, f := range forms(ip) {
			if name == "mapped plain" {
				continue
			}
			if Refused(f) != want {
				t.Errorf("%s as %s (%s): Refused = %v, want %v like the IPv4 address", v4, name, f, !want, want)
			}
		}
	}
	for _, v4 := range []string{"10.0.0.5", "192.168.1.1", "8.8.8.8"} {
		for name, f := range forms(netip.MustParseAddr(v4)) {
			if name != "mapped plain" && (Refused(f) || Unspecified(f)) {
				t.Errorf("%s as %s (%s) refused", v4, name, f)
			}
		}
	}
	for _, s := range []string{"0.0.0.0", "::", "::ffff:0.0.0.0", "64:ff9b::", "::ffff:0:0.0.0.0"} {
		if !Unspecified(netip.MustParseAddr(s)) {
			t.Errorf("%s: not unspecified", s)
		}
	}
	for _, s := range []string{"::1", "127.0.0.1", "0.0.0.1"} {
		ip := netip.MustParseAddr(s)
		if Unspecified(ip) || Refused(ip) {
			t.Errorf("%s refused", s)
		}
	}
}

// TestHostIDNA: names are judged as the resolver will see them.
func TestHostIDNA(t *testing.T) {
	for in, want := range map[string]string{
		"169。254。169。254":           "169.254.169.254",
		"169．254．169．254":           "169.254.169.254",
		"169｡254｡169｡254。":          "169.254.169.254",
		"１６９．２５４．１６９．２５４":           "169.254.169.254",
		"METADATA．Google．internal.": "metadata.google.internal",
		"gpu_box.lan":               "gpu_box.lan", // ASCII is left to the resolver, as Go's HTTP client does
		"GPU-Box.LAN.":              "gpu-box.lan",
		"[::1]":                     "::1",
		"bücher.example":            "xn--bcher-kva.example",
	} {
		got, err := Host(in)
		if err != nil || got != want {
			t.Errorf("Host(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Host("bad name\u00a0.lan"); err == nil {
		t.Error("a name IDNA refuses was accepted")
	}
	for _, h := range []string{"metadata．google．internal", "metadata。goog", "ｍｅｔａｄａｔａ", "Metadata.Google.Internal."} {
		if !MetadataName(h) {
			t.Errorf("MetadataName(%q) = false", h)
		}
	}
}
