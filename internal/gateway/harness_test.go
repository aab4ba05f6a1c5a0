package gateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// usageLog is a UsageSink that keeps what it is given.
type usageLog struct {
	mu   sync.Mutex
	recs []store.UsageRecord
}

func (u *usageLog) Record(r store.UsageRecord) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.recs = append(u.recs, r)
}

func (u *usageLog) all() []store.UsageRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]store.UsageRecord(nil), u.recs...)
}

// harness is a gateway over a real SQLite store, served by a real HTTP
// server, with a manual clock for cooldowns.
type harness struct {
	t     *testing.T
	db    *sqlstore.DB
	snap  *snapshot.Holder
	gw    *Gateway
	srv   *httptest.Server
	clock *clock.Manual
	usage *usageLog
	reg   *prometheus.Registry
	org   *store.Org
	proj  *store.Project
	key   string
	// probes, in a probed harness, gate providers on readiness.
	probes *readiness.Cache
}

func newHarness(t *testing.T, cfg Config) *harness { return newHarnessOn(t, "sqlite", cfg) }

// onEveryStore runs fn with a harness on each store dialect: the tests
// whose subject is state read from the store.
func onEveryStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	storetest.EachWith(t, func(t *testing.T, d string) *harness { return newHarnessOn(t, d, Config{}) }, fn)
}

func newHarnessOn(t *testing.T, dialect string, cfg Config) *harness {
	return newHarnessWith(t, dialect, cfg, false)
}

// newProbedHarness is a harness whose gateway is gated by a real
// readiness cache (probes driven by h.probe()).
func newProbedHarness(t *testing.T, cfg Config) *harness {
	return newHarnessWith(t, "sqlite", cfg, true)
}

// probe runs one probe round and lets the gateway follow.
func (h *harness) probe() { h.probes.ProbeAll(context.Background()) }

func newHarnessWith(t *testing.T, dialect string, cfg Config, probed bool) *harness {
	t.Helper()
	ctx := context.Background()
	h := &harness{t: t, db: storetest.Open(t, dialect, nil), clock: clock.NewManual(time.Unix(1_800_000_000, 0)),
		usage: &usageLog{}, reg: prometheus.NewRegistry()}
	h.org = &store.Org{Name: "default"}
	must(t, h.db.CreateOrg(ctx, h.org))
	h.proj = &store.Project{OrgID: h.org.ID, Name: "default"}
	must(t, h.db.CreateProject(ctx, h.proj))
	h.key = h.newKey(nil, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.snap = snapshot.NewHolder(h.db, log)
	must(t, h.snap.Reload(ctx))
	opts := Options{Log: log, Clock: h.clock, Usage: h.usage, Registry: h.reg}
	if probed {
		h.probes = readiness.New(readiness.Config{FailAfter: 1}, h.clock, &http.Client{}, log)
		h.snap.OnSwap(func(s *snapshot.Snapshot) {
			var ps []readiness.Provider
			s.EachOrg(func(o *snapshot.Org) {
				for _, p := range o.Providers.All() {
					ps = append(ps, readiness.Provider{ID: p.ID, Kind: p.Kind, BaseURL: p.BaseURL, Upstream: p.MetadataSource == "upstream"})
				}
			})
			h.probes.Sync(ps)
		})
		opts.Readiness = h.probes
	}
	h.gw = New(cfg, h.snap, opts)
	if probed {
		h.probes.OnChange(h.gw.Refresh)
	}
	h.srv = httptest.NewServer(h.gw)
	t.Cleanup(h.srv.Close)
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) reload() { must(h.t, h.snap.Reload(context.Background())) }

// newKey creates a virtual key and returns its token.
func (h *harness) newKey(models []string, expires *time.Time) string {
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	must(h.t, h.db.CreateVirtualKey(context.Background(), &store.VirtualKey{ProjectID: h.proj.ID, Name: "k",
		Lookup: lookup, Hash: secret.HashOf(tok.Reveal()), Models: models, ExpiresAt: expires}))
	if h.snap != nil {
		h.reload()
	}
	return tok.Reveal()
}

// provider registers an upstream and returns its id.
func (h *harness) provider(slug, base string, settings store.ProviderSettings, keys ...string) int64 {
	p := &store.Provider{OrgID: h.org.ID, Slug: slug, Name: slug, Kind: "vllm", BaseURL: base, MetadataSource: "configured", Settings: settings}
	for _, k := range keys {
		p.Keys = append(p.Keys, store.ProviderKey{Secret: secret.New(k), Weight: 1})
	}
	must(h.t, h.db.CreateProvider(context.Background(), p))
	h.reload()
	return p.ID
}

func (h *harness) route(model, strategy string, targets ...store.Target) {
	must(h.t, h.db.CreateRoute(context.Background(), &store.Route{ProjectID: h.proj.ID, Model: model, Strategy: strategy, Targets: targets}))
	h.reload()
}

// post sends a client request with the harness key.
func (h *harness) post(path, body string, hdr ...string) *http.Response {
	return h.postCtx(context.Background(), path, body, hdr...)
}

func (h *harness) postCtx(ctx context.Context, path, body string, hdr ...string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// deadURL is an address nothing listens on: connection refused.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// upstream is a scripted OpenAI-compatible server that records requests.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	auths  []string
}

func newUpstream(t *testing.T, fn func(w http.ResponseWriter, r *http.Request, body []byte)) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		fn(w, r, b)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) base() string { return u.URL + "/v1" }

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

func (u *upstream) last() (body, auth string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1], u.auths[len(u.auths)-1]
}

// sseWrite writes events, flushing each.
func sseWrite(w http.ResponseWriter, events ...string) {
	for _, e := range events {
		_, _ = io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
}

// readEvents reads a client-side SSE body into events (without the blank
// line).
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var (
		out []string
		cur strings.Builder
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == "" {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(sc.Text())
	}
	return out
}

func runtimeGosched() { time.Sleep(time.Millisecond) } // waiting for goroutines to arrive, not a timing assertion
