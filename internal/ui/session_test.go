package ui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

func TestSessionTableIsBoundedAndEvictsLeastRecentlyUsed(t *testing.T) {
	c := clock.NewManual(time.Unix(1_700_000_000, 0))
	s := newSessions(c, 3, time.Hour)
	ids := make([]string, 0, 5)
	for i := range 3 {
		_, id := s.create(secret.New(fmt.Sprint("tok", i)), snapshot.AdminScope{})
		ids = append(ids, id)
	}
	// Using the oldest makes the second the least recently used.
	if _, ok := s.get(ids[0]); !ok {
		t.Fatal("session 0 missing")
	}
	_, id := s.create(secret.New("tok3"), snapshot.AdminScope{})
	ids = append(ids, id)
	if s.len() != 3 {
		t.Fatalf("table holds %d sessions, want the bound 3", s.len())
	}
	if _, ok := s.get(ids[1]); ok {
		t.Fatal("the least recently used session survived an insert past the bound")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := s.get(ids[i]); !ok {
			t.Fatalf("session %d was evicted, but it was not the least recently used", i)
		}
	}
	// A flood of logins never grows the table past its bound.
	for i := range 1000 {
		s.create(secret.New(fmt.Sprint("flood", i)), snapshot.AdminScope{})
	}
	if s.len() != 3 {
		t.Fatalf("after a flood the table holds %d sessions, want 3", s.len())
	}
}

func TestSessionBoundLogsOutTheOldestBrowser(t *testing.T) {
	h := newHarness(t, Options{MaxSessions: 2})
	first, second, third := h.browser(), h.browser(), h.browser()
	first.login(h.token)
	second.login(h.token)
	third.login(h.token)
	if r := first.get("/ui/models"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/ui/login") {
		t.Fatalf("evicted session still served: %d", r.status)
	}
	for _, b := range []*browser{second, third} {
		if r := b.get("/ui/models"); r.status != http.StatusOK {
			t.Fatalf("a session within the bound was logged out: %d", r.status)
		}
	}
}

func TestSessionExpiresAfterTwelveHoursIdle(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	// Activity keeps it alive: each request restarts the idle time.
	for range 3 {
		h.clock.Advance(DefaultIdleTimeout - time.Minute)
		if r := b.get("/ui/models"); r.status != http.StatusOK {
			t.Fatalf("session used within 12 h was logged out: %d", r.status)
		}
	}
	h.clock.Advance(DefaultIdleTimeout)
	r := b.get("/ui/models?org=default")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next=%2Fui%2Fmodels%3Forg%3Ddefault" {
		t.Fatalf("after 12 h idle: %d to %q, want the login page returning here", r.status, r.header.Get("Location"))
	}
	if c := r.header.Get("Set-Cookie"); !strings.Contains(c, CookieName+"=;") || !strings.Contains(c, "Max-Age=0") {
		t.Fatalf("expired session's cookie not cleared: %q", c)
	}
	if h.ui.sessions.len() != 0 {
		t.Fatalf("expired session still held: %d", h.ui.sessions.len())
	}
}

func TestSessionCookieFlags(t *testing.T) {
	check := func(t *testing.T, h *harness, secure bool) {
		b := h.browser()
		r := b.post("/ui/login", map[string][]string{"token": {h.token}})
		cookies := (&http.Response{Header: r.header}).Cookies()
		if len(cookies) != 1 {
			t.Fatalf("login set %d cookies: %v", len(cookies), r.header["Set-Cookie"])
		}
		c := cookies[0]
		if c.Name != CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure != secure {
			t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, Secure=%v", c, secure)
		}
		if len(c.Value) < 40 {
			t.Fatalf("session id %q is too short to be unguessable", c.Value)
		}
		if strings.Contains(r.header.Get("Set-Cookie"), h.token) {
			t.Fatal("the admin token is in the cookie")
		}
		// Log out clears the cookie and the session.
		out := b.post("/ui/logout", map[string][]string{"csrf": {b.csrf()}})
		if out.status != http.StatusSeeOther || !strings.Contains(out.header.Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("logout: %d, Set-Cookie %q", out.status, out.header.Get("Set-Cookie"))
		}
		if h.ui.sessions.len() != 0 {
			t.Fatal("logout left the session in the table")
		}
		if r := b.get("/ui/models"); r.status != http.StatusSeeOther {
			t.Fatalf("after logout the UI still answers %d", r.status)
		}
	}
	t.Run("http", func(t *testing.T) { check(t, newHarness(t, Options{}), false) })
	t.Run("tls", func(t *testing.T) { check(t, newHarnessWith(t, Options{}, httptest.NewTLSServer), true) })
}

func TestLoggedOutCookieCannotBeReplayed(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	cs := b.client.Jar.Cookies(mustURL(t, h.srv.URL+"/ui/"))
	if len(cs) != 1 {
		t.Fatalf("cookies %v", cs)
	}
	stolen := cs[0].Value
	b.post("/ui/logout", map[string][]string{"csrf": {b.csrf()}})
	req := httptest.NewRequest(http.MethodGet, "/ui/models", nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: stolen})
	w := httptest.NewRecorder()
	h.ui.ServeHTTP(w, req)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("a logged-out session id still works: %d", w.Code)
	}
}
