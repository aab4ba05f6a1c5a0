package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

// One token's logins evict that token's own oldest sessions first: a
// holder of any token cannot log every other operator out by filling the
// table.
func TestOneTokenCannotEvictOtherTokensSessions(t *testing.T) {
	s := newSessions(clock.NewManual(time.Unix(1_700_000_000, 0)), 100, time.Hour)
	_, admin1 := s.create(secret.New("global"), snapshot.AdminScope{TokenID: 1})
	for i := range 1000 {
		s.create(secret.New(fmt.Sprint("org", i)), snapshot.AdminScope{TokenID: 2, OrgID: 7, Org: "x"})
	}
	if _, ok := s.get(admin1); !ok {
		t.Fatal("another token's logins evicted the global admin's session")
	}
	if n := s.len(); n != 1+MaxSessionsPerToken {
		t.Fatalf("table holds %d sessions, want 1 + %d (the flooding token's cap)", n, MaxSessionsPerToken)
	}
}

// Behind a TLS proxy (X-Forwarded-Proto: https), or with SecureCookie, the
// session cookie is Secure although rolter itself speaks plain HTTP.
func TestSessionCookieSecureBehindTLSProxy(t *testing.T) {
	login := func(h *harness, proto string) *http.Cookie {
		t.Helper()
		form := url.Values{"token": {h.token}}
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", h.srv.URL)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		r := h.browser().do(req)
		cookies := (&http.Response{Header: r.header}).Cookies()
		if r.status != http.StatusSeeOther || len(cookies) != 1 {
			t.Fatalf("login: %d %v", r.status, r.header["Set-Cookie"])
		}
		return cookies[0]
	}
	h := newHarness(t, Options{})
	if c := login(h, "https"); !c.Secure {
		t.Fatal("X-Forwarded-Proto: https, yet the cookie is not Secure")
	}
	if c := login(h, "http"); c.Secure {
		t.Fatal("plain HTTP without the option, yet the cookie is Secure")
	}
	if c := login(newHarness(t, Options{SecureCookie: true}), ""); !c.Secure {
		t.Fatal("SecureCookie set, yet the cookie is not Secure")
	}
}

// A form body is bounded whichever way the CSRF token comes, and a
// multipart body is refused: neither changes anything.
func TestFormBodyBoundedOnTheHeaderPathToo(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	token := b.csrf()
	post := func(ctype, body string) response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/providers/_new", strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Origin", h.srv.URL)
		req.Header.Set(csrfHeader, token)
		req.Header.Set("HX-Request", "true")
		return b.do(req)
	}
	big := "org=default&name=big&kind=vllm&base_url=http%3A%2F%2F10.0.0.5%2Fv1&description=" + strings.Repeat("a", 2<<20)
	if r := post("application/x-www-form-urlencoded", big); r.status != http.StatusForbidden {
		t.Fatalf("a 2 MiB form with the CSRF header: %d, want 403", r.status)
	}
	if r := post("multipart/form-data; boundary=x", "--x--\r\n"); r.status != http.StatusForbidden {
		t.Fatalf("a multipart body: %d, want 403", r.status)
	}
	if p, err := h.svc.ListProviders(context.Background(), "default", admin.PageRequest{}); err != nil || len(p.Data) != 0 {
		t.Fatalf("providers after the refusals: %+v, %v", p.Data, err)
	}
	// The header path still works for a form of ordinary size.
	ok := "org=default&name=small&kind=vllm&base_url=http%3A%2F%2F10.0.0.5%2Fv1&metadata_source=configured"
	if r := post("application/x-www-form-urlencoded", ok); r.status >= 400 {
		t.Fatalf("an ordinary form with the CSRF header: %d %s", r.status, r.body)
	}
}

// A page number past the last, however large, shows the last page.
func TestModelsPageNumberIsClamped(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	for _, p := range []string{"184467440737095517", "9223372036854775807", "-5", "x"} {
		if r := b.get("/ui/models?org=default&project=default&page=" + p); r.status != http.StatusOK {
			t.Fatalf("page=%s: %d", p, r.status)
		}
	}
}

func TestSafeNextStaysInsideTheUI(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/providers?org=a":        "/ui/providers?org=a",
		"/ui/../admin/v1/orgs":       "/ui/",
		"/ui/../%09/evil.example":    "/ui/",
		"/ui/..\t/evil.example":      "/ui/",
		"//evil.example/ui/":         "/ui/",
		"https://evil.example/ui/":   "/ui/",
		"/ui//evil.example":          "/ui/evil.example",
		"/ui/x/../../../evil":        "/ui/",
		"/ui\\evil":                  "/ui/",
		"/ui/models\x7f":             "/ui/",
		"":                           "/ui/",
		"/ui/providers/p?done=a/../": "/ui/providers/p?done=a/../",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
