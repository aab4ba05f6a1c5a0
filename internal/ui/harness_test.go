package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// harness is the UI over a real SQLite store and the real admin Service,
// served by httptest, with a manual clock for session expiry.
type harness struct {
	t     testing.TB
	db    *sqlstore.DB
	svc   *admin.Service
	snap  *snapshot.Holder
	ui    *UI
	srv   *httptest.Server
	clock *clock.Manual
	logs  *testkit.Buffer
	// token is a global admin token.
	token string
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	return newHarnessWith(t, opts, httptest.NewServer)
}

func newHarnessWith(t testing.TB, opts Options, serve func(http.Handler) *httptest.Server) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, clock: clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), logs: &testkit.Buffer{}}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.db = storetest.Open(t, "sqlite", nil)
	snap := snapshot.NewHolder(h.db, log)
	if err := snap.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	h.svc, h.snap = admin.NewService(h.db, snap, log), snap
	if _, err := h.svc.CreateOrg(ctx, admin.OrgInput{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	h.token = h.mintToken(`"global"`)
	if opts.Clock == nil {
		opts.Clock = h.clock
	}
	h.ui = New(h.svc, log, opts)
	h.srv = serve(h.ui)
	t.Cleanup(h.srv.Close)
	return h
}

// mintToken creates an admin token of scope (JSON: "global" or
// {"org":"x"}) and returns its secret.
func (h *harness) mintToken(scope string) string {
	h.t.Helper()
	return h.mintTokenView(scope).Secret
}

func (h *harness) mintTokenView(scope string) admin.AdminTokenView {
	h.t.Helper()
	v, err := h.svc.CreateAdminToken(context.Background(), admin.AdminTokenInput{Name: "ui test", Scope: json.RawMessage(scope)})
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func secretOf(s string) secret.Secret { return secret.New(s) }

// browser is a cookie-keeping client that does not follow redirects, so
// tests see every 303.
type browser struct {
	h      *harness
	client *http.Client
}

func (h *harness) browser() *browser {
	jar, _ := cookiejar.New(nil)
	// A client of its own (srv.Client is shared): its own cookie jar.
	c := &http.Client{Transport: h.srv.Client().Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{h: h, client: c}
}

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) response {
	b.h.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(path string) response {
	b.h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.h.srv.URL+path, nil)
	return b.do(req)
}

// post sends a form as a same-origin browser would (Origin set).
func (b *browser) post(path string, form url.Values) response {
	b.h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.h.srv.URL)
	return b.do(req)
}

// login logs in with token and fails the test unless it worked.
func (b *browser) login(token string) {
	b.h.t.Helper()
	r := b.post("/ui/login", url.Values{"token": {token}})
	if r.status != http.StatusSeeOther || r.header.Get("Set-Cookie") == "" {
		b.h.t.Fatalf("login: %d %q", r.status, r.body)
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a page.
func (b *browser) csrf() string {
	b.h.t.Helper()
	r := b.get("/ui/providers")
	m := csrfRe.FindStringSubmatch(r.body)
	if m == nil {
		b.h.t.Fatalf("no CSRF token on the providers page: %d %s", r.status, r.body)
	}
	return m[1]
}

// postCSRF is post with the session's CSRF token added.
func (b *browser) postCSRF(path string, form url.Values) response {
	b.h.t.Helper()
	form.Set("csrf", b.csrf())
	return b.post(path, form)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, body)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(body, w) {
			t.Fatalf("%s: unexpected %q in:\n%s", what, w, body)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
