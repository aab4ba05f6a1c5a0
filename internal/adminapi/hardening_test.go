package adminapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/adminapi"
)

// TestAdminResponsesAreLockedDown: every admin response, refusals
// included, forbids sniffing and framing, and none grants CORS.
func TestAdminResponsesAreLockedDown(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	for _, c := range []struct{ method, path, auth, origin string }{
		{"GET", "/orgs", "Bearer " + adminToken, "https://evil.example"},
		{"GET", "/orgs", "", "https://evil.example"},
		{"OPTIONS", "/orgs", "", "https://evil.example"},
		{"OPTIONS", "/orgs", "Bearer " + adminToken, "https://evil.example"},
		{"GET", "/nowhere", "Bearer " + adminToken, ""},
		{"POST", "/orgs", "Bearer " + adminToken, ""},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+adminapi.Prefix+c.path, strings.NewReader("{"))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" {
			t.Errorf("%s %s (%d): security headers %v", c.method, c.path, resp.StatusCode, h)
		}
		for k := range h {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s %s: CORS header %s", c.method, c.path, k)
			}
		}
	}
}

// TestAdminRefusesNonJSONBodies: a body declared as something other than
// JSON gets 415 before anything is decoded; JSON, no Content-Type, and
// curl -d's default form type are accepted.
func TestAdminRefusesNonJSONBodies(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	send := func(method, path, ctype, body string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+adminapi.Prefix+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "multipart/form-data; boundary=x", "application/xml", "text/html", "nonsense/"} {
		code, body := send("POST", "/orgs", ct, `{"name":"refused`+string(rune('a'+i))+`"}`)
		if code != http.StatusUnsupportedMediaType || !strings.Contains(body, `"code":"unsupported_media_type"`) {
			t.Fatalf("POST %q: %d %s", ct, code, body)
		}
		if code, body := send("PATCH", "/orgs/default", ct, `{"name":"x"}`); code != http.StatusUnsupportedMediaType {
			t.Fatalf("PATCH %q: %d %s", ct, code, body)
		}
	}
	if code, body := e.do("GET", "/orgs", ""); code != 200 || strings.Contains(body, "refused") {
		t.Fatalf("a refused body was applied: %s", body)
	}
	for i, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/merge-patch+json", "application/x-www-form-urlencoded"} {
		if code, body := send("POST", "/orgs", ct, `{"name":"accepted`+string(rune('a'+i))+`"}`); code != 201 {
			t.Fatalf("POST %q: %d %s", ct, code, body)
		}
	}
	// The form type is accepted only because curl sends it; the body must
	// still be JSON.
	if code, _ := send("POST", "/orgs", "application/x-www-form-urlencoded", "name=x"); code != 400 {
		t.Fatalf("form-encoded body: %d", code)
	}
	// Unauthenticated requests are refused as 401 first.
	req, _ := http.NewRequest("POST", e.srv.URL+adminapi.Prefix+"/orgs", strings.NewReader("x"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated: %d", resp.StatusCode)
	}
}

// TestProviderBaseURLAddressPolicy: private and loopback upstreams are
// fine (self-hosted backends live there); link-local and cloud metadata
// addresses are refused unless the operator allows them.
func TestProviderBaseURLAddressPolicy(t *testing.T) {
	refused := []string{
		"http://169.254.169.254/latest",
		"http://169.254.10.1:8000/v1",
		"http://[fe80::1]:8000/v1",
		"http://[fd00:ec2::254]/v1",
		"http://metadata.google.internal/computeMetadata/v1",
		"http://METADATA.google.internal./v1",
		"http://100.100.100.200/v1",
		"http://[::ffff:169.254.169.254]/v1",
		"http://2852039166/v1",
		"http://0xa9.0xfe.0xa9.0xfe/v1",
	}
	allowed := []string{
		"http://10.0.0.5:8000/v1",
		"http://192.168.1.20/v1",
		"http://172.16.0.9:8080/v1",
		"http://127.0.0.1:8000/v1",
		"http://[fd12:3456::1]:8000/v1",
		"http://gpu-box.lan:8000/v1",
		"http://beef.cafe/v1",
		"https://api.example.com/v1",
	}
	e := newEnv(t, "sqlite", nil)
	n := 0
	create := func(base string) (int, string) {
		n++
		return e.do("POST", "/orgs/default/providers",
			`{"name":"p`+strconv.Itoa(n)+`","kind":"vllm","base_url":"`+base+`"}`)
	}
	for _, u := range refused {
		code, body := create(u)
		if code != 400 || !strings.Contains(body, `"code":"validation_failed"`) || !strings.Contains(body, `"base_url"`) {
			t.Fatalf("%s: %d %s", u, code, body)
		}
	}
	for _, u := range allowed {
		if code, body := create(u); code != 201 {
			t.Fatalf("%s: %d %s", u, code, body)
		}
	}
	// A patch cannot move a provider onto a metadata address either.
	if code, body := e.do("PATCH", "/orgs/default/providers/p"+strconv.Itoa(len(refused)+1),
		`{"base_url":"http://169.254.169.254/v1"}`); code != 400 || !strings.Contains(body, `"base_url"`) {
		t.Fatalf("patch onto metadata: %d %s", code, body)
	}
	e.svc.SetAllowLinkLocalUpstreams(true)
	for _, u := range refused[:7] {
		if code, body := create(u); code != 201 {
			t.Fatalf("allowed by configuration, %s: %d %s", u, code, body)
		}
	}
}
