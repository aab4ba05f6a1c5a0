package readiness

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	testEpoch = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	secretKey = secret.New("sk-test-0123456789")
)

// fakeEngine is an httptest server answering canned bodies per path and
// recording every request it gets.
type fakeEngine struct {
	srv *httptest.Server

	mu      sync.Mutex
	routes  map[string]cannedResponse
	counts  map[string]int         // "METHOD /path" → requests
	headers map[string]http.Header // "METHOD /path" → headers of the last request
}

type cannedResponse struct {
	status int
	body   string
}

func newEngine(t *testing.T) *fakeEngine {
	t.Helper()
	f := &fakeEngine{
		routes:  map[string]cannedResponse{},
		counts:  map[string]int{},
		headers: map[string]http.Header{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEngine) url() string { return f.srv.URL }

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.counts[key]++
	f.headers[key] = r.Header.Clone()
	resp, ok := f.routes[r.URL.Path]
	f.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		resp = cannedResponse{404, `{"detail":"Not Found"}`}
	}
	if resp.body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write([]byte(resp.body))
}

func (f *fakeEngine) set(path string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[path] = cannedResponse{status, body}
}

func (f *fakeEngine) hits(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[key]
}

func (f *fakeEngine) requests() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.counts))
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

func (f *fakeEngine) lastHeaders(key string) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[key]
}

type lockedBuffer = testkit.Buffer

// newTestCache returns a cache on a manual clock at testEpoch, with its own
// transport (closed at cleanup so no connection goroutine outlives the
// test) and a debug logger writing to the returned buffer.
func newTestCache(t *testing.T, cfg Config) (*Cache, *lockedBuffer) {
	t.Helper()
	return newClockedCache(t, cfg, clock.NewManual(testEpoch))
}

// newClockedCache is newTestCache on clk: clock.System for a test whose
// Run probes on its own schedule in real time.
func newClockedCache(t *testing.T, cfg Config, clk clock.Clock) (*Cache, *lockedBuffer) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return New(cfg, clk, &http.Client{Transport: tr}, log), logs
}

func mustStatus(t *testing.T, c *Cache, id int64) Status {
	t.Helper()
	st, ok := c.Status(id)
	if !ok {
		t.Fatalf("provider %d unknown", id)
	}
	return st
}

// countingFn is an OnChange function that counts its calls and fails the
// test if two calls overlap.
type countingFn struct {
	calls   atomic.Int64
	running atomic.Int64
	overlap atomic.Bool
}

func (c *countingFn) call() {
	if c.running.Add(1) > 1 {
		c.overlap.Store(true)
	}
	c.calls.Add(1)
	c.running.Add(-1)
}

func (c *countingFn) n() int { return int(c.calls.Load()) }
