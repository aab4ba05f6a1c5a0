package fleet

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
)

// TestScenario35_VllmConfigUnauthenticatedFirst: without a valid fleet
// key every request to the fleet endpoints gets 401, even one that would
// fail another check first (a proxy header naming only trusted hops, the
// wrong method, an unknown path, a bad body). With the key, those checks
// answer as before.
func TestScenario35_VllmConfigUnauthenticatedFirst(t *testing.T) {
	// The test's own address is a trusted proxy, so an X-Forwarded-For of
	// trusted hops only leaves the box unknown (400 for a keyed caller).
	f := newFleetFixture(t, "sqlite", HandlerConfig{ProxyHeader: "X-Forwarded-For",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	allTrusted := []string{"X-Forwarded-For", "127.0.0.2"}
	cases := []struct {
		name, method, path, body string
		header                   []string
		keyed                    int // the status with a valid key
	}{
		{"config, all hops trusted", "GET", fleetapi.ConfigPath, "", allTrusted, 400},
		{"config, no proxy header", "GET", fleetapi.ConfigPath, "", nil, 400},
		{"report, all hops trusted", "POST", fleetapi.ReportPath, `{"applied":[]}`, allTrusted, 400},
		{"config, wrong method", "POST", fleetapi.ConfigPath, "{}", nil, 405},
		{"report, wrong method", "GET", fleetapi.ReportPath, "", allTrusted, 405},
		{"unknown path", "GET", "/vllm/secrets", "", nil, 404},
		{"report, bad body", "POST", fleetapi.ReportPath, `{"discovered":{"gpu_count":-5}}`, []string{"X-Forwarded-For", "127.0.0.1, 10.1.1.1"}, 400},
	}
	for _, c := range cases {
		for _, key := range []string{"", "rf-not-a-key", "rf-aaaaaaaaaaaa_wrong-secret", f.key + "x"} {
			code, body, hdr := f.do(t, c.method, c.path, key, c.body, c.header...)
			if code != 401 || !strings.Contains(body, `"code":"unauthorized"`) || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s, key %q: %d %s, want 401 unauthorized", c.name, key, code, body)
			}
		}
		if code, body, _ := f.do(t, c.method, c.path, f.key, c.body, c.header...); code != c.keyed {
			t.Errorf("%s with the key: %d %s, want %d", c.name, code, body, c.keyed)
		}
	}
	if n := f.st.calls.Load(); n != 0 {
		t.Fatalf("a refused request wrote a report: %d", n)
	}
	// The keyed, resolvable request still works: the box behind the
	// proxy is the right-most untrusted hop.
	code, body, _ := f.do(t, "GET", fleetapi.ConfigPath, f.key, "", "X-Forwarded-For", "10.0.0.9")
	if code != 200 || !strings.Contains(body, `"ip":"10.0.0.9"`) || !strings.Contains(body, `"host_id":`+strconv.FormatInt(f.h3.ID, 10)) {
		t.Fatalf("keyed config: %d %s", code, body)
	}
}

// TestScenario33_FleetBearerSchemeIsCaseInsensitive: a box may send
// "bearer" or "BEARER" (RFC 7235).
func TestScenario33_FleetBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := newFleetFixture(t, "sqlite", HandlerConfig{})
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", f.srv.URL+fleetapi.ConfigPath, nil)
		req.Header.Set("Authorization", scheme+" "+f.key)
		resp, err := f.srv.Client().Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", scheme, resp.StatusCode)
		}
	}
}
