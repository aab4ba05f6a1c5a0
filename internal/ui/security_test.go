package ui

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	h := newHarness(t, Options{})
	anon, b := h.browser(), h.browser()
	b.login(h.token)
	static := h.ui.static.url("app.css")
	cases := []struct {
		name string
		b    *browser
		path string
	}{
		{"login page", anon, "/ui/login"},
		{"redirect to login", anon, "/ui/models"},
		{"static file", anon, static},
		{"unknown path", anon, "/ui/nope"},
		{"models", b, "/ui/models"},
		{"providers", b, "/ui/providers"},
		{"placeholder", b, "/ui/usage"},
		{"not found org", b, "/ui/providers?org=nope"},
	}
	for _, c := range cases {
		r := c.b.get(c.path)
		want := map[string]string{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
				"frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
		}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s (%d): %s = %q, want %q", c.name, r.status, k, got, v)
			}
		}
	}
	// A static file is served with its type (nosniff needs it) and cached
	// for good under its versioned URL.
	r := anon.get(static)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/css; charset=utf-8" ||
		!strings.Contains(r.header.Get("Cache-Control"), "immutable") {
		t.Fatalf("static: %d %v", r.status, r.header)
	}
}

func TestPostWithoutCSRFTokenIsRefusedAndChangesNothing(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	form := url.Values{"org": {"default"}, "name": {"csrf probe"}, "kind": {"vllm"}, "base_url": {"http://10.0.0.5:8000/v1"},
		"metadata_source": {"configured"}}
	for name, csrf := range map[string]string{"missing": "", "wrong": "not-the-token"} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if csrf != "" {
			f.Set("csrf", csrf)
		}
		r := b.post("/ui/providers/_new", f)
		if r.status != http.StatusForbidden {
			t.Fatalf("%s CSRF token: %d, want 403", name, r.status)
		}
		mustContain(t, name+" CSRF token", r.body, "CSRF token", "nothing was changed", "csrf_refused")
	}
	// Logging out is a state change too.
	if r := b.post("/ui/logout", url.Values{}); r.status != http.StatusForbidden {
		t.Fatalf("logout without CSRF token: %d", r.status)
	}
	ps, err := h.svc.ListProviders(context.Background(), "default", admin.PageRequest{})
	if err != nil || len(ps.Data) != 0 {
		t.Fatalf("a refused POST created providers: %v %v", ps.Data, err)
	}
	if r := b.get("/ui/models"); r.status != http.StatusOK {
		t.Fatalf("a refused logout ended the session: %d", r.status)
	}
	// The header htmx sends works as the field does.
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/providers/_new", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(csrfHeader, b.csrf())
	if r := b.do(req); r.status != http.StatusSeeOther {
		t.Fatalf("POST with the CSRF header: %d %s", r.status, r.body)
	}
}

func TestCrossSitePostsAreRefused(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {h.token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if r := b.do(req); r.status != http.StatusForbidden || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("cross-site login: %d, cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	// What chromium sends for our own login form under no-referrer.
	req, _ = http.NewRequest(http.MethodPost, h.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {h.token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if r := b.do(req); r.status != http.StatusSeeOther || r.header.Get("Set-Cookie") == "" {
		t.Fatalf("same-origin login with Origin null: %d", r.status)
	}
	f := url.Values{"csrf": {b.csrf()}, "org": {"default"}, "name": {"x"}, "kind": {"vllm"}, "base_url": {"http://10.0.0.5/v1"}}
	req, _ = http.NewRequest(http.MethodPost, h.srv.URL+"/ui/providers/_new", strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if r := b.do(req); r.status != http.StatusForbidden {
		t.Fatalf("cross-site POST with a valid token: %d", r.status)
	}
}

func TestLoginChecksTheTokenAndReturnsWhereItWasGoing(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	r := b.get("/ui/providers?org=default")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next=%2Fui%2Fproviders%3Forg%3Ddefault" {
		t.Fatalf("anonymous: %d %q", r.status, r.header.Get("Location"))
	}
	for _, bad := range []string{"", "ra-wrong", h.token + "x"} {
		r := b.post("/ui/login", url.Values{"token": {bad}})
		if r.status != http.StatusUnauthorized || r.header.Get("Set-Cookie") != "" {
			t.Fatalf("token %q: %d", bad, r.status)
		}
		mustContain(t, "bad token", r.body, "not a valid admin token")
		mustNotContain(t, "bad token", r.body, `value="`+bad+`x`)
	}
	r = b.post("/ui/login", url.Values{"token": {" " + h.token + "\n"}, "next": {"/ui/providers?org=default"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/providers?org=default" {
		t.Fatalf("login: %d %q", r.status, r.header.Get("Location"))
	}
	// next never leads outside the UI.
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/admin/v1/orgs", "/ui\\evil"} {
		r := h.browser().post("/ui/login", url.Values{"token": {h.token}, "next": {next}})
		if r.header.Get("Location") != "/ui/" {
			t.Fatalf("next %q redirected to %q", next, r.header.Get("Location"))
		}
	}
	// The token never reaches the logs.
	if strings.Contains(h.logs.String(), h.token) {
		t.Fatal("admin token in the logs")
	}
}

func TestRevokedTokenLogsItsSessionsOut(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.mintTokenView(`"global"`)
	b := h.browser()
	b.login(tok.Secret)
	if r := b.get("/ui/models"); r.status != http.StatusOK {
		t.Fatalf("before revoking: %d", r.status)
	}
	if _, err := h.svc.RevokeAdminToken(context.Background(), strconv.FormatInt(tok.ID, 10)); err != nil {
		t.Fatal(err)
	}
	if r := b.get("/ui/models"); r.status != http.StatusSeeOther {
		t.Fatalf("a revoked token's session still served: %d", r.status)
	}
	if h.ui.sessions.len() != 0 {
		t.Fatal("a revoked token's session is still held")
	}
}

func TestOrgScopedTokenSeesOnlyItsOrg(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateOrg(ctx, admin.OrgInput{Name: "team-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateProject(ctx, "team-b", admin.ProjectInput{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "secret-neighbour", Kind: "vllm", BaseURL: "http://10.0.0.9/v1"}); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.mintToken(`{"org":"team-b"}`))
	r := b.get("/ui/providers")
	if r.status != http.StatusOK {
		t.Fatalf("providers: %d", r.status)
	}
	mustContain(t, "org token", r.body, `<option value="team-b" selected>`, "org token · team-b")
	mustNotContain(t, "org token", r.body, `<option value="default"`, "secret-neighbour")
	for _, path := range []string{"/ui/providers?org=default", "/ui/models?org=default", "/ui/providers/secret-neighbour?org=default",
		"/ui/slug-check?org=default&slug=secret-neighbour"} {
		r := b.get(path)
		if r.status != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", path, r.status)
		}
		mustNotContain(t, path, r.body, "secret-neighbour")
	}
	// A write aimed at another org is refused and changes nothing.
	r = b.postCSRF("/ui/providers/_new", url.Values{"org": {"default"}, "name": {"intruder"}, "kind": {"vllm"},
		"base_url": {"http://10.0.0.5/v1"}, "metadata_source": {"configured"}})
	if r.status != http.StatusNotFound {
		t.Fatalf("create in another org: %d", r.status)
	}
	if _, err := h.svc.GetProvider(ctx, "default", "intruder"); err == nil {
		t.Fatal("an org token created a provider in another org")
	}
}

// inlineCode finds what the CSP would block: a <script> with a body, a
// style attribute or element, an inline event handler, a javascript: URL.
var inlineCode = regexp.MustCompile(`(?i)<script(\s[^>]*)?>[^<]|\sstyle=|<style|\son[a-z]+=|javascript:`)

func TestPagesCarryNoInlineScriptOrStyle(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "vllm a", Kind: "vllm", BaseURL: "http://10.0.0.5/v1",
		Models: []string{"m"}, Keys: []admin.KeyInput{{Secret: secretOf("sk-a")}}}); err != nil {
		t.Fatal(err)
	}
	anon, b := h.browser(), h.browser()
	b.login(h.token)
	pages := map[string]response{"login": anon.get("/ui/login")}
	for _, p := range []string{"/ui/models", "/ui/providers", "/ui/providers/_new", "/ui/providers/vllm-a", "/ui/routes", "/ui/settings",
		"/ui/providers/nope", "/ui/slug-check?slug=vllm-a"} {
		pages[p] = b.get(p)
	}
	pages["invalid form"] = b.postCSRF("/ui/providers/_new", url.Values{"org": {"default"}, "name": {"x"}, "base_url": {"ftp://x"}})
	for name, r := range pages {
		if loc := inlineCode.FindString(r.body); loc != "" {
			t.Errorf("%s (%d) has inline code the CSP blocks: %q", name, r.status, loc)
		}
		// Scripts come only from the UI's own static files.
		for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(r.body, -1) {
			if !strings.Contains(m, `src="/ui/static/`) {
				t.Errorf("%s: script not from static/: %s", name, m)
			}
		}
	}
}

func TestEverythingRenderedIsEscaped(t *testing.T) {
	h := newHarness(t, Options{})
	const evil = `<script>alert(1)</script>`
	if _, err := h.svc.CreateProvider(context.Background(), "default", admin.ProviderInput{Name: evil, Slug: "xss", Kind: "vllm",
		BaseURL: "http://10.0.0.5/v1", Models: []string{`"><img src=x onerror=alert(2)>`}}); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	for _, p := range []string{"/ui/providers", "/ui/providers/xss", "/ui/models", "/ui/models?q=" + url.QueryEscape(evil)} {
		r := b.get(p)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d", p, r.status)
		}
		mustNotContain(t, p, r.body, evil, `<img src=x`)
		if p != "/ui/models" {
			mustContain(t, p, r.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
		}
	}
}
