package usage_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
	"github.com/rolter/rolter/internal/usage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rec(i int) store.UsageRecord {
	return store.UsageRecord{
		CreatedAt: time.Now(), OrgID: 1, ProjectID: 1, KeyID: int64(i%5 + 1),
		AddressKind: "route", Address: "team/qwen3", Route: "team/qwen3",
		ProviderID: 1, ProviderSlug: "vllm", UpstreamModel: "Qwen/Qwen3-8B",
		Status: 200, Attempts: 1, Latency: 120 * time.Millisecond, PromptTokens: i, CompletionTokens: 1,
	}
}

// start runs r until the test ends (or the returned stop is called) and
// waits for Run to return.
func start(t *testing.T, r *usage.Recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func countUsage(t *testing.T, s store.Store) int {
	t.Helper()
	n := 0
	page := store.Page{Limit: 1000}
	for {
		rows, err := s.ListUsage(context.Background(), store.UsageFilter{OrgID: 1}, page)
		if err != nil {
			t.Fatal(err)
		}
		n += len(rows)
		if len(rows) < page.Limit {
			return n
		}
		page.After = rows[len(rows)-1].ID
	}
}

// batchSizes records the size of every batch that reaches the store.
type batchSizes struct {
	usage.Writer
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(recs))
	b.mu.Unlock()
	return b.Writer.InsertUsage(ctx, recs)
}

func TestBatchesReachStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		st := storetest.Open(t, d, nil)
		w := &batchSizes{Writer: st}
		r := usage.New(w, usage.Config{Batch: 50, Interval: 20 * time.Millisecond}, nil)
		start(t, r)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 250 {
					r.Record(rec(g*250 + i))
				}
			})
		}
		wg.Wait()
		testkit.Eventually(t, "1000 records written", func() bool { return r.Written() == 1000 })
		if n := countUsage(t, st); n != 1000 || r.Dropped() != 0 {
			t.Fatalf("stored %d, dropped %d", n, r.Dropped())
		}
		w.mu.Lock()
		for _, n := range w.sizes {
			if n < 1 || n > 50 {
				t.Errorf("batch of %d records (limit 50)", n)
			}
		}
		if len(w.sizes) < 20 {
			t.Errorf("%d batches for 1000 records of at most 50", len(w.sizes))
		}
		w.mu.Unlock()
		// A batch that never fills goes out on the interval.
		r.Record(rec(0))
		testkit.Eventually(t, "a partial batch written", func() bool { return r.Written() == 1001 })
	})
}

// blockingWriter holds every InsertUsage until released (or its context
// ends).
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	stored  atomic.Int64
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blockingWriter) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
		b.stored.Add(int64(len(recs)))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	w := newBlockingWriter()
	r := usage.New(w, usage.Config{Buffer: 10, Batch: 1, Interval: time.Hour}, nil)
	var onDrop atomic.Int64
	r.OnDrop = func(n int) { onDrop.Add(int64(n)) }
	start(t, r)
	r.Record(rec(0))
	<-w.entered // Run holds record 0 in a write that does not return
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 110 {
			r.Record(rec(1 + i))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked on a full buffer")
	}
	if r.Dropped() != 100 || onDrop.Load() != 100 {
		t.Fatalf("dropped %d, OnDrop saw %d; want 100 (110 recorded, buffer 10)", r.Dropped(), onDrop.Load())
	}
	close(w.release)
	testkit.Eventually(t, "the buffered records written", func() bool { return r.Written() == 11 })
	if w.stored.Load() != 11 || r.Dropped() != 100 {
		t.Fatalf("stored %d, dropped %d", w.stored.Load(), r.Dropped())
	}
}

// swapWriter forwards to whichever writer is current.
type swapWriter struct{ w atomic.Pointer[usage.Writer] }

func (s *swapWriter) set(w usage.Writer) { s.w.Store(&w) }

func (s *swapWriter) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	return (*s.w.Load()).InsertUsage(ctx, recs)
}

func TestStoreOutageDropsAndStaysBounded(t *testing.T) {
	down := storetest.Open(t, "sqlite", nil)
	if err := down.Close(); err != nil {
		t.Fatal(err)
	}
	sw := &swapWriter{}
	sw.set(down)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	r := usage.New(sw, usage.Config{Buffer: 1000, Batch: 100, Interval: 5 * time.Millisecond}, log)
	start(t, r)

	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		r.Record(rec(i))
	}
	testkit.Eventually(t, "every record accounted for", func() bool { return r.Dropped()+r.Written() == n })
	runtime.GC()
	runtime.ReadMemStats(&after)
	if r.Written() != 0 || r.Dropped() != n {
		t.Fatalf("store down: written %d, dropped %d", r.Written(), r.Dropped())
	}
	// 100k records are ~20 MB; the Recorder may hold Buffer+Batch of them.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Fatalf("heap grew by %d bytes while the store was down", grew)
	}
	// Refused batches are logged, but not once per batch: hundreds were
	// refused, and the log allows a line per 10s.
	if lines := strings.Count(logs.String(), "usage records dropped"); lines < 1 || lines > 3 {
		t.Fatalf("%d log lines for the outage, want 1 (a few if the machine is very slow):\n%s", lines, logs.String())
	}

	// Run kept going: once the store is back, records are stored again.
	up := storetest.Open(t, "sqlite", nil)
	sw.set(up)
	for i := range 10 {
		r.Record(rec(i))
	}
	testkit.Eventually(t, "records written after recovery", func() bool { return r.Written() == 10 })
	if got := countUsage(t, up); got != 10 || r.Dropped() != n {
		t.Fatalf("after recovery: stored %d, dropped %d", got, r.Dropped())
	}
}

type syncBuffer = testkit.Buffer

func TestRunFlushesOnCancel(t *testing.T) {
	st := storetest.Open(t, "sqlite", nil)
	w := &batchSizes{Writer: st}
	// Nothing is written before the cancel: batches never fill and the
	// interval never passes.
	r := usage.New(w, usage.Config{Batch: 500, Interval: time.Hour}, nil)
	stop := start(t, r)
	for i := range 1234 {
		r.Record(rec(i))
	}
	stop()
	if r.Written() != 1234 || r.Dropped() != 0 || countUsage(t, st) != 1234 {
		t.Fatalf("after flush: written %d, dropped %d, stored %d", r.Written(), r.Dropped(), countUsage(t, st))
	}
	w.mu.Lock()
	if len(w.sizes) != 3 || w.sizes[0] != 500 || w.sizes[2] != 234 {
		t.Errorf("flush batches: %v, want [500 500 234]", w.sizes)
	}
	w.mu.Unlock()
	// After Run, records are counted as dropped, not left in the buffer.
	r.Record(rec(0))
	if r.Dropped() != 1 {
		t.Fatalf("record after Run: dropped %d", r.Dropped())
	}
}

func TestFlushIsBounded(t *testing.T) {
	w := newBlockingWriter() // never released: the store hangs
	r := usage.New(w, usage.Config{Interval: time.Hour, FlushTimeout: 50 * time.Millisecond}, nil)
	stop := start(t, r)
	for i := range 5 {
		r.Record(rec(i))
	}
	began := time.Now()
	stop()
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("flush took %v with a 50ms bound", took)
	}
	if r.Dropped() != 5 || r.Written() != 0 {
		t.Fatalf("hung store at shutdown: dropped %d, written %d", r.Dropped(), r.Written())
	}
}

// flakyWriter fails the first n calls.
type flakyWriter struct {
	fail   atomic.Int64
	calls  atomic.Int64
	stored atomic.Int64
}

func (f *flakyWriter) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return errors.New("connection reset")
	}
	f.stored.Add(int64(len(recs)))
	return nil
}

func TestRetriesOnce(t *testing.T) {
	f := &flakyWriter{}
	f.fail.Store(1)
	r := usage.New(f, usage.Config{Batch: 3, Interval: time.Hour}, nil)
	start(t, r)
	for i := range 3 {
		r.Record(rec(i))
	}
	testkit.Eventually(t, "the retried batch", func() bool { return r.Written() == 3 })
	f.fail.Store(2)
	for i := range 3 {
		r.Record(rec(i))
	}
	testkit.Eventually(t, "the twice-refused batch dropped", func() bool { return r.Dropped() == 3 })
	if f.calls.Load() != 4 || f.stored.Load() != 3 || r.Written() != 3 {
		t.Fatalf("calls %d, stored %d, written %d", f.calls.Load(), f.stored.Load(), r.Written())
	}
}

// TestAccountingUnderRace records from many goroutines while Run stops:
// every record ends up written or dropped, never lost. Run it with -race.
func TestAccountingUnderRace(t *testing.T) {
	for range 20 {
		f := &flakyWriter{}
		r := usage.New(f, usage.Config{Buffer: 64, Batch: 8, Interval: time.Millisecond}, nil)
		var onDrop atomic.Int64
		r.OnDrop = func(n int) { onDrop.Add(int64(n)) }
		stop := start(t, r)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 500 {
					r.Record(rec(g*500 + i))
				}
			})
		}
		time.Sleep(time.Millisecond)
		stop()
		wg.Wait()
		if got := r.Written() + r.Dropped(); got != 4000 || uint64(f.stored.Load()) != r.Written() ||
			uint64(onDrop.Load()) != r.Dropped() {
			t.Fatalf("written %d + dropped %d = %d of 4000; writer stored %d; OnDrop saw %d",
				r.Written(), r.Dropped(), got, f.stored.Load(), onDrop.Load())
		}
	}
}

func TestRunTwicePanics(t *testing.T) {
	r := usage.New(newBlockingWriter(), usage.Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Run(ctx) // returns at once: cancelled, nothing to flush
	defer func() {
		if recover() == nil {
			t.Fatal("second Run did not panic")
		}
	}()
	r.Run(ctx)
}

// TestScenario26_UsageBatchSurvivesBadRow: a request whose model string
// holds a NUL byte (refused 403, but still accounted) made PostgreSQL
// refuse the whole usage batch (SQLSTATE 22021), losing every other
// tenant's records in it. Now bad bytes are stored replaced, a row the
// store still refuses costs only itself and is counted as rejected, and a
// store that is down is not sent a failed batch's rows one by one.
func TestScenario26_UsageBatchSurvivesBadRow(t *testing.T) {
	tenant := func(org int64, i int) store.UsageRecord {
		r := rec(i)
		r.OrgID = org
		return r
	}
	batch := func(bad ...store.UsageRecord) []store.UsageRecord {
		var b []store.UsageRecord
		for i := range 3 {
			b = append(b, tenant(1, i), tenant(2, i))
		}
		return append(b, bad...)
	}
	nulModel := tenant(3, 0)
	nulModel.Address, nulModel.AddressKind, nulModel.Route = "\x00", "route", ""
	nulModel.UpstreamModel, nulModel.Status, nulModel.Class = "Qwen\xff\xfe\x00", 403, "model_not_allowed"

	countOrg := func(t *testing.T, s store.Store, org int64) []store.UsageRecord {
		t.Helper()
		rows, err := s.ListUsage(context.Background(), store.UsageFilter{OrgID: org}, store.Page{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// run records recs as one full batch and waits until each is
	// accounted for.
	run := func(t *testing.T, w usage.Writer, recs []store.UsageRecord, log *slog.Logger) (*usage.Recorder, *atomic.Int64) {
		t.Helper()
		r := usage.New(w, usage.Config{Batch: len(recs), Interval: time.Hour}, log)
		var onReject atomic.Int64
		r.OnReject = func(n int) { onReject.Add(int64(n)) }
		start(t, r)
		for _, x := range recs {
			r.Record(x)
		}
		testkit.Eventually(t, "every record accounted for", func() bool {
			return r.Written()+r.Dropped()+r.Rejected() == uint64(len(recs))
		})
		return r, &onReject
	}

	storetest.Each(t, func(t *testing.T, d string) {
		t.Run("bad bytes stored replaced", func(t *testing.T) {
			st := storetest.Open(t, d, nil)
			w := &batchSizes{Writer: st}
			r, _ := run(t, w, batch(nulModel), nil)
			if r.Written() != 7 || r.Dropped() != 0 || r.Rejected() != 0 {
				t.Fatalf("written %d, dropped %d, rejected %d; want 7 written", r.Written(), r.Dropped(), r.Rejected())
			}
			if n1, n2 := len(countOrg(t, st, 1)), len(countOrg(t, st, 2)); n1 != 3 || n2 != 3 {
				t.Fatalf("stored %d records of org 1 and %d of org 2, want 3 and 3", n1, n2)
			}
			got := countOrg(t, st, 3)
			if len(got) != 1 || got[0].Address != "\uFFFD" || got[0].UpstreamModel != "Qwen\uFFFD\uFFFD" || got[0].Status != 403 {
				t.Fatalf("the bad record: %+v", got)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.sizes) != 1 {
				t.Fatalf("batches %v: want one of 7", w.sizes)
			}
		})

		t.Run("refused row dropped alone", func(t *testing.T) {
			st := storetest.Open(t, d, nil)
			storetest.RefuseUsageStatus(t, st, 1000)
			refused := tenant(1, 99)
			refused.Status = 5000
			w := &batchSizes{Writer: st}
			logs := &syncBuffer{}
			r, onReject := run(t, w, batch(refused, nulModel), slog.New(slog.NewTextHandler(logs, nil)))
			if r.Written() != 7 || r.Rejected() != 1 || onReject.Load() != 1 || r.Dropped() != 0 {
				t.Fatalf("written %d, rejected %d (OnReject %d), dropped %d; want 7, 1, 0",
					r.Written(), r.Rejected(), onReject.Load(), r.Dropped())
			}
			n1, n2, n3 := len(countOrg(t, st, 1)), len(countOrg(t, st, 2)), len(countOrg(t, st, 3))
			if n1 != 3 || n2 != 3 || n3 != 1 {
				t.Fatalf("stored %d, %d, %d records of orgs 1, 2, 3; want 3, 3, 1", n1, n2, n3)
			}
			w.mu.Lock()
			sizes := append([]int(nil), w.sizes...)
			w.mu.Unlock()
			// The batch once (not retried whole: it would fail again),
			// then each of its 8 rows.
			if want := []int{8, 1, 1, 1, 1, 1, 1, 1, 1}; !slices.Equal(sizes, want) {
				t.Fatalf("inserts %v, want %v", sizes, want)
			}
			if !strings.Contains(logs.String(), "usage records rejected") || !strings.Contains(logs.String(), "rejected=1") {
				t.Fatalf("no log line for the rejected record:\n%s", logs.String())
			}
		})

		t.Run("store gone during the row-by-row retry", func(t *testing.T) {
			st := storetest.Open(t, d, nil)
			storetest.RefuseUsageStatus(t, st, 1000)
			refused := tenant(1, 99)
			refused.Status = 5000
			w := &batchSizes{Writer: &closeOnError{DB: st}}
			r, onReject := run(t, w, batch(refused), nil)
			if r.Dropped() != 7 || r.Written() != 0 || r.Rejected() != 0 || onReject.Load() != 0 {
				t.Fatalf("dropped %d, written %d, rejected %d; want all 7 dropped", r.Dropped(), r.Written(), r.Rejected())
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if want := []int{7, 1}; !slices.Equal(w.sizes, want) {
				t.Fatalf("inserts %v, want %v: one row tried, then the rest dropped", w.sizes, want)
			}
		})
	})

	t.Run("store down: no row-by-row", func(t *testing.T) {
		down := storetest.Open(t, "sqlite", nil)
		if err := down.Close(); err != nil {
			t.Fatal(err)
		}
		w := &batchSizes{Writer: down}
		r := usage.New(w, usage.Config{Batch: 5, Interval: time.Hour}, nil)
		start(t, r)
		for i := range 10 {
			r.Record(rec(i))
		}
		testkit.Eventually(t, "both batches dropped", func() bool { return r.Dropped() == 10 })
		w.mu.Lock()
		defer w.mu.Unlock()
		if want := []int{5, 5, 5, 5}; !slices.Equal(w.sizes, want) || r.Rejected() != 0 {
			t.Fatalf("inserts %v (want %v: each batch tried twice, whole), rejected %d", w.sizes, want, r.Rejected())
		}
	})
}

// closeOnError is a real store that closes itself when a write fails: the
// database going away between a batch and its row-by-row retry.
type closeOnError struct{ *sqlstore.DB }

func (c *closeOnError) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	err := c.DB.InsertUsage(ctx, recs)
	if err != nil {
		c.DB.Close()
	}
	return err
}
