package adminapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// TestScenario29_RefusedUpstreamAddressesAtAdminWrite: a provider's
// base_url may not spell a refused address in a way the old check missed:
// an IPv6 form carrying a refused IPv4 address (NAT64, IPv4-compatible,
// IPv4-translated), an unspecified address, or a name with fullwidth or
// ideographic dots, which Go's HTTP client maps with IDNA before it dials.
// Each is a 400 validation_failed on base_url and writes nothing. The
// opt-in lets the link-local/metadata class through, never 0.0.0.0 or ::.
func TestScenario29_RefusedUpstreamAddressesAtAdminWrite(t *testing.T) {
	linkLocal := []string{
		"http://169。254。169。254/latest/meta-data/",
		"http://169．254．169．254/v1",
		"http://169｡254｡169｡254/v1",
		"http://１６９．２５４．１６９．２５４/v1",
		"http://metadata．google．internal/computeMetadata/v1",
		"http://ＭＥＴＡＤＡＴＡ。goog/v1",
		"http://[64:ff9b::a9fe:a9fe]/v1",
		"http://[64:ff9b::169.254.169.254]/v1",
		"http://[::a9fe:a9fe]/v1",
		"http://[::ffff:0:a9fe:a9fe]/v1",
		"http://[64:ff9b::6464:64c8]/v1", // Alibaba's metadata endpoint through NAT64
	}
	unspecified := []string{
		"http://0.0.0.0:8000/v1",
		"http://[::]:8000/v1",
		"http://[::ffff:0.0.0.0]:8000/v1",
		"http://[64:ff9b::]:8000/v1",
		"http://0。0。0。0:8000/v1",
	}
	malformed := []string{
		"http://gpu\u00a0box.lan/v1", // IDNA refuses it: no resolver would look it up
	}
	allowed := []string{
		"http://[64:ff9b::a00:5]:8000/v1", // NAT64 of 10.0.0.5
		"http://[::1]:8000/v1",
		"http://gpu_box:8000/v1", // a compose service name: ASCII, left to the resolver
		"http://bücher.example/v1",
	}
	each(t, func(t *testing.T, e *env) {
		n := 0
		create := func(name, base string) (int, string) {
			n++
			return e.do("POST", "/orgs/default/providers",
				`{"name":"`+name+strconv.Itoa(n)+`","kind":"vllm","base_url":"`+base+`"}`)
		}
		refuse := func(urls []string, want string) {
			t.Helper()
			for _, u := range urls {
				code, body := create("refused-", u)
				if code != 400 || !strings.Contains(body, `"code":"`+admin.CodeValidation+`"`) ||
					!strings.Contains(body, `"base_url"`) || !strings.Contains(body, want) {
					t.Errorf("%s: %d %s, want 400 %s on base_url saying %q", u, code, body, admin.CodeValidation, want)
				}
			}
		}
		refuse(linkLocal, "refused unless link-local upstreams are allowed")
		refuse(unspecified, "unspecified address")
		refuse(malformed, "not a valid host name")
		for _, u := range allowed {
			if code, body := create("allowed-", u); code != 201 {
				t.Errorf("%s: %d %s, want 201", u, code, body)
			}
		}
		// A patch cannot move a provider onto such an address either.
		first := "/orgs/default/providers/allowed-" + strconv.Itoa(len(linkLocal)+len(unspecified)+len(malformed)+1)
		for _, u := range []string{"http://169。254。169。254/v1", "http://[::]:8000/v1"} {
			if code, body := e.do("PATCH", first, `{"base_url":"`+u+`"}`); code != 400 || !strings.Contains(body, `"base_url"`) {
				t.Errorf("patch onto %s: %d %s", u, code, body)
			}
		}
		if p := e.ok("GET", first, "", 200); p["base_url"] != strings.TrimSuffix(allowed[0], "/") {
			t.Errorf("after the refused patches: base_url %v, want %s", p["base_url"], allowed[0])
		}
		if code, body := e.do("GET", "/orgs/default/providers", ""); code != 200 || strings.Contains(body, "refused-") ||
			strings.Count(body, `"slug":"allowed-`) != len(allowed) {
			t.Fatalf("after the refusals: %d %s, want only the %d allowed providers", code, body, len(allowed))
		}

		e.svc.SetAllowLinkLocalUpstreams(true)
		for _, u := range linkLocal {
			if code, body := create("optin-", u); code != 201 {
				t.Errorf("allowed by configuration, %s: %d %s", u, code, body)
			}
		}
		refuse(unspecified, "unspecified address")
	})

	// The importers' entry point applies the same rule.
	for _, h := range []string{"169。254。169。254", "metadata．google．internal", "64:ff9b::a9fe:a9fe", "::a9fe:a9fe", "0.0.0.0", "::"} {
		if admin.UpstreamHostProblem(h, false) == "" {
			t.Errorf("UpstreamHostProblem(%q) allows it", h)
		}
	}
	if why := admin.UpstreamHostProblem("0.0.0.0", true); why == "" {
		t.Error("UpstreamHostProblem allows 0.0.0.0 under the opt-in")
	}
}
