package fleet

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// queryCounter is a real store that counts the calls the fleet endpoints
// make, by method.
type queryCounter struct {
	store.Store
	lists, keys, fetches, fetchRows, reports, byIP, beats, beatRows atomic.Int64
}

func (q *queryCounter) RecordHeartbeats(ctx context.Context, b []store.Heartbeat) error {
	q.beats.Add(1)
	q.beatRows.Add(int64(len(b)))
	return q.Store.RecordHeartbeats(ctx, b)
}

func (q *queryCounter) ListHostsByIP(ctx context.Context, orgID int64, ip string) ([]store.Host, error) {
	q.byIP.Add(1)
	return q.Store.ListHostsByIP(ctx, orgID, ip)
}

func (q *queryCounter) RecordHostReports(ctx context.Context, entries []store.HostReportEntry, at time.Time) error {
	q.reports.Add(1)
	return q.Store.RecordHostReports(ctx, entries, at)
}

func (q *queryCounter) ListLiveHosts(ctx context.Context) ([]store.Host, error) {
	q.lists.Add(1)
	return q.Store.ListLiveHosts(ctx)
}

func (q *queryCounter) FleetKeyByLookup(ctx context.Context, lookup string) (*store.FleetKey, error) {
	q.keys.Add(1)
	return q.Store.FleetKeyByLookup(ctx, lookup)
}

func (q *queryCounter) RecordConfigFetches(ctx context.Context, f []store.ConfigFetch) error {
	q.fetches.Add(1)
	q.fetchRows.Add(int64(len(f)))
	return q.Store.RecordConfigFetches(ctx, f)
}

func (q *queryCounter) calls() int64 { return q.lists.Load() + q.keys.Load() + q.fetches.Load() }

// dirFixture is fleetFixture's org and hosts behind a handler over a
// counting store, with a clock the test moves.
type dirFixture struct {
	*fleetFixture
	q   *queryCounter
	h   *Handler
	mu  sync.Mutex
	now time.Time
}

func newDirFixture(t *testing.T, dialect string, lcfg LivenessConfig) *dirFixture {
	f := newFleetFixture(t, dialect, HandlerConfig{})
	d := &dirFixture{fleetFixture: f, q: &queryCounter{Store: f.st.Store}, now: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
	d.h = NewHandler(d.q, HandlerConfig{Liveness: lcfg, Now: d.clock}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.srv.Close()
	f.srv = httptest.NewServer(d.h)
	t.Cleanup(f.srv.Close)
	return d
}

func (d *dirFixture) clock() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now
}

func (d *dirFixture) advance(by time.Duration) {
	d.mu.Lock()
	d.now = d.now.Add(by)
	d.mu.Unlock()
}

func (d *dirFixture) config(t *testing.T) string {
	t.Helper()
	code, body, _ := d.do(t, "GET", fleetapi.ConfigPath, d.key, "")
	if code != 200 {
		t.Fatalf("config: %d %s", code, body)
	}
	return body
}

// TestConfigAnsweredFromMemory (issue 23 §3, issue 24 §2): after the
// first GET /vllm/config loads the directory, further fetches make no
// store call at all (no query, no liveness write), and the endpoint keeps
// answering with the store closed. A change announced through Invalidate
// is served at the next fetch, and a revoked key stops working.
func TestConfigAnsweredFromMemory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		d := newDirFixture(t, dialect, LivenessConfig{})
		ctx := context.Background()
		first := d.config(t)
		if !strings.Contains(first, `"ip":"127.0.0.1"`) || strings.Count(first, `"host_id"`) != 2 {
			t.Fatalf("first config: %s", first)
		}
		if d.q.lists.Load() != 1 || d.q.keys.Load() != 1 || d.q.fetches.Load() != 1 {
			t.Fatalf("first fetch: %d host lists, %d key lookups, %d liveness writes; want 1 each",
				d.q.lists.Load(), d.q.keys.Load(), d.q.fetches.Load())
		}
		before := d.q.calls()
		for range 50 {
			d.advance(time.Second)
			if got := d.config(t); got != first {
				t.Fatalf("config changed without a write: %s", got)
			}
		}
		if n := d.q.calls() - before; n != 0 {
			t.Fatalf("50 steady fetches made %d store calls, want 0", n)
		}

		// A write, announced: the next fetch serves it.
		h1 := d.host(t, d.h1.ID)
		h1.Port = 9001
		must(t, d.st.UpdateHost(ctx, h1, nil))
		if d.config(t) != first {
			t.Fatal("an unannounced write reached the answer: the directory is not what answered")
		}
		d.h.Invalidate()
		if got := d.config(t); !strings.Contains(got, `"port":9001`) {
			t.Fatalf("after Invalidate: %s", got)
		}

		// Unannounced changes are served once the directory is over its
		// age: one reload, on the handler's clock.
		h1.Port = 9002
		must(t, d.st.UpdateHost(ctx, h1, nil))
		lists := d.q.lists.Load()
		d.advance(DefaultDirectoryMaxAge - time.Second)
		if got := d.config(t); strings.Contains(got, `"port":9002`) || d.q.lists.Load() != lists {
			t.Fatalf("reloaded before its age: %d reloads, %s", d.q.lists.Load()-lists, got)
		}
		d.advance(time.Second)
		if got := d.config(t); !strings.Contains(got, `"port":9002`) || d.q.lists.Load() != lists+1 {
			t.Fatalf("over its age: %d reloads, %s", d.q.lists.Load()-lists, got)
		}

		// The store goes away: the endpoint still answers from memory,
		// even after a change is announced (the reload fails, the last
		// directory serves) and once the directory is over its age.
		steady := d.config(t)
		must(t, d.st.Store.Close())
		if got := d.config(t); got != steady {
			t.Fatalf("with the store closed: %s", got)
		}
		lists = d.q.lists.Load()
		d.advance(2 * DefaultDirectoryMaxAge)
		if got := d.config(t); got != steady {
			t.Fatalf("with the store closed, past the directory's age: %s", got)
		}
		if d.q.lists.Load() != lists+1 {
			t.Fatalf("past its age with the store closed: %d reload attempts, want 1", d.q.lists.Load()-lists)
		}
		// A failed reload is not retried by every request.
		for range 5 {
			d.config(t)
		}
		if d.q.lists.Load() != lists+1 {
			t.Fatalf("a failed reload was retried %d times within a second", d.q.lists.Load()-lists-1)
		}
	})
}

// A revoked fleet key stops working at the next fetch after the
// revocation is announced, though the directory had it in memory.
func TestRevokedKeyForgotten(t *testing.T) {
	d := newDirFixture(t, "sqlite", LivenessConfig{})
	d.config(t)
	keys, err := d.st.ListFleetKeys(context.Background(), d.org, store.Page{Limit: 10})
	must(t, err)
	must(t, d.st.RevokeFleetKey(context.Background(), d.org, keys[0].ID, time.Now()))
	d.h.Invalidate()
	if code, body, _ := d.do(t, "GET", fleetapi.ConfigPath, d.key, ""); code != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d %s", code, body)
	}
}

// TestLivenessBatched (issue 23 §3): fetches are written at most once per
// host per flush interval, every host in one store call, unless the
// host's liveness state changes (its first fetch here, or after a
// silence over the interval), which is written at once. The clock and the
// flushes are the test's.
func TestLivenessBatched(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ticks := make(chan time.Time)
		flushed := make(chan int, 16)
		d := newDirFixture(t, dialect, LivenessConfig{Flush: time.Minute, Ticks: ticks,
			Flushed: func(n int, err error) {
				if err != nil {
					t.Errorf("flush: %v", err)
				}
				flushed <- n
			}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { d.h.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		flush := func() int {
			ticks <- time.Now()
			select {
			case n := <-flushed:
				return n
			case <-time.After(30 * time.Second):
				t.Fatal("no flush after a tick")
				return 0
			}
		}
		stored := func(id int64) time.Time {
			h := d.host(t, id)
			if h.LastConfigFetch == nil {
				return time.Time{}
			}
			return *h.LastConfigFetch
		}

		// The first fetch changes the state (never seen): written at once.
		t0 := d.clock()
		d.config(t)
		<-flushed
		if d.q.fetches.Load() != 1 || !stored(d.h1.ID).Equal(t0) || !stored(d.h2.ID).Equal(t0) {
			t.Fatalf("first fetch: %d writes, stored %v %v, want %v", d.q.fetches.Load(), stored(d.h1.ID), stored(d.h2.ID), t0)
		}
		// Steady polling for most of a minute: nothing written...
		for range 5 {
			d.advance(10 * time.Second)
			d.config(t)
		}
		if d.q.fetches.Load() != 1 || !stored(d.h1.ID).Equal(t0) {
			t.Fatalf("steady polling wrote: %d writes", d.q.fetches.Load())
		}
		// ...until the flush: both hosts, the latest fetch, one call.
		last := d.clock()
		if n := flush(); n != 2 || d.q.fetches.Load() != 2 || d.q.fetchRows.Load() != 4 {
			t.Fatalf("flush: %d hosts, %d writes, %d rows", n, d.q.fetches.Load(), d.q.fetchRows.Load())
		}
		if !stored(d.h1.ID).Equal(last) || !stored(d.h2.ID).Equal(last) {
			t.Fatalf("after the flush: %v %v, want %v", stored(d.h1.ID), stored(d.h2.ID), last)
		}
		if n := flush(); n != 0 || d.q.fetches.Load() != 2 {
			t.Fatalf("a flush with nothing fetched wrote %d hosts", n)
		}
		// A silence longer than the interval, then a fetch: written now.
		d.advance(2 * time.Minute)
		back := d.clock()
		d.config(t)
		<-flushed
		if d.q.fetches.Load() != 3 || !stored(d.h1.ID).Equal(back) {
			t.Fatalf("fetch after a silence: %d writes, stored %v, want %v", d.q.fetches.Load(), stored(d.h1.ID), back)
		}
		// On shutdown what is pending is written.
		d.advance(5 * time.Second)
		end := d.clock()
		d.config(t)
		cancel()
		<-done
		if n := <-flushed; n != 2 || !stored(d.h2.ID).Equal(end) {
			t.Fatalf("final flush: %d hosts, stored %v, want %v", n, stored(d.h2.ID), end)
		}
	})
}

// A fleet key revoked where this replica never heard of it (a missed
// announcement; here a write straight to the store) stops working once
// the directory is over its age: the keys are reloaded with the hosts.
func TestRevokedKeyExpiresWithDirectory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		d := newDirFixture(t, dialect, LivenessConfig{})
		ctx := context.Background()
		d.config(t)
		keys, err := d.st.ListFleetKeys(ctx, d.org, store.Page{Limit: 10})
		must(t, err)
		must(t, d.st.RevokeFleetKey(ctx, d.org, keys[0].ID, time.Now()))
		d.advance(DefaultDirectoryMaxAge / 2)
		d.config(t) // unannounced: still in memory
		d.advance(DefaultDirectoryMaxAge / 2)
		if code, body, _ := d.do(t, "GET", fleetapi.ConfigPath, d.key, ""); code != http.StatusUnauthorized {
			t.Fatalf("revoked key past the directory's age: %d %s", code, body)
		}
		if code, _, _ := d.do(t, "POST", fleetapi.ReportPath, d.key, `{"applied":[]}`); code != http.StatusUnauthorized {
			t.Fatalf("revoked key on report: %d", code)
		}
	})
}

// gatedStore is a real store whose ListLiveHosts waits for the test.
type gatedStore struct {
	store.Store
	entered chan struct{} // receives when a ListLiveHosts starts
	release chan struct{} // closed to let it go on
	ctxErr  chan error    // what its context said when let go
	lists   atomic.Int64
}

func (g *gatedStore) ListLiveHosts(ctx context.Context) ([]store.Host, error) {
	if g.lists.Add(1) == 1 {
		g.entered <- struct{}{}
		<-g.release
		g.ctxErr <- ctx.Err()
	}
	return g.Store.ListLiveHosts(ctx)
}

// A reload runs apart from the request that started it: Invalidate (run
// under the snapshot holder's lock) never waits for it, a request that
// waits for it may leave, and the requester leaving does not cut it short
// or hold further reloads back.
func TestDirectoryReloadApart(t *testing.T) {
	f := newFleetFixture(t, "sqlite", HandlerConfig{})
	g := &gatedStore{Store: f.st.Store, entered: make(chan struct{}, 1), release: make(chan struct{}), ctxErr: make(chan error, 1)}
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	dir := NewDirectory(g, func() time.Time { return now })

	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan error, 1)
	go func() {
		_, err := dir.current(ctx)
		loaded <- err
	}()
	<-g.entered // the reload holds the store call
	invalidated := make(chan struct{})
	go func() { dir.Invalidate(); close(invalidated) }()
	select {
	case <-invalidated:
	case <-time.After(30 * time.Second):
		t.Fatal("Invalidate waited for a reload")
	}
	// Another request waits for that reload; its client leaves.
	wctx, wcancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := dir.current(wctx)
		waited <- err
	}()
	wcancel()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("a waiter whose client left got a directory out of nothing")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter stayed after its client left")
	}
	// The requester leaves too; the reload goes on.
	cancel()
	close(g.release)
	if err := <-g.ctxErr; err != nil {
		t.Fatalf("the reload ran under the requester's context: %v", err)
	}
	if err := <-loaded; err != nil {
		t.Fatalf("the reload failed: %v", err)
	}
	// It loaded before the Invalidate: the next request reloads, and
	// nothing holds it back.
	if _, err := dir.current(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := g.lists.Load(); n != 2 {
		t.Fatalf("%d loads, want 2 (the first, then one after the Invalidate)", n)
	}
	if _, err := dir.current(context.Background()); err != nil || g.lists.Load() != 2 {
		t.Fatalf("a fresh directory reloaded: %d loads, %v", g.lists.Load(), err)
	}
}

// BenchmarkConfig is one GET /vllm/config in the steady state, from the
// handler's authentication to its answer (no network): a box with two
// hosts.
func BenchmarkConfig(b *testing.B) {
	ctx := context.Background()
	st := storetest.Open(b, "sqlite", nil)
	org := &store.Org{Name: "default"}
	must(b, st.CreateOrg(ctx, org))
	pj := &store.Project{OrgID: org.ID, Name: "default"}
	must(b, st.CreateProject(ctx, pj))
	tok, lookup := secret.Mint(secret.PrefixFleetKey)
	must(b, st.CreateFleetKey(ctx, &store.FleetKey{OrgID: org.ID, Name: "k", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}, 2))
	for i := range 2 {
		must(b, st.CreateHost(ctx, &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: 8000 + i, ModelName: "qwen3",
			APIKey: secret.New("rh-k_" + string(rune('a'+i))), Recipe: fleetapi.Recipe{VLLM: vllm()}}, nil))
	}
	h := NewHandler(st, HandlerConfig{}, slog.New(slog.DiscardHandler))
	req := httptest.NewRequest("GET", fleetapi.ConfigPath, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Authorization", "Bearer "+tok.Reveal())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}
