package fleet

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// slowFetches is a real store whose first RecordConfigFetches waits for
// the test.
type slowFetches struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int64
}

func (s *slowFetches) RecordConfigFetches(ctx context.Context, f []store.ConfigFetch) error {
	if s.calls.Add(1) == 1 {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.RecordConfigFetches(ctx, f)
}

// Flushes that overlap (the batch ticker and a request's immediate
// write) never move a host's liveness back, in memory or in the store: a
// flush still writing an older fetch finishes before the next one writes
// the newer.
func TestLivenessFlushesNeverGoBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		f := newFleetFixture(t, dialect, HandlerConfig{})
		ctx := context.Background()
		st := &slowFetches{Store: f.st.Store, entered: make(chan struct{}, 1), release: make(chan struct{})}
		t0 := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
		l := NewLiveness(st, LivenessConfig{}, func() time.Time { return t0 }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		id := f.h1.ID

		l.Seen(id, t0)
		var wg sync.WaitGroup
		wg.Go(func() { l.Flush(ctx) }) // writes t0, slowly
		<-st.entered
		t1 := t0.Add(10 * time.Second)
		l.Seen(id, t1)
		if last, _ := l.Last(id); !last.Equal(t1) {
			t.Fatalf("Last during a flush: %v, want %v", last, t1)
		}
		wg.Go(func() { l.Flush(ctx) }) // writes t1, after the first
		close(st.release)
		wg.Wait()
		if last, _ := l.Last(id); !last.Equal(t1) {
			t.Fatalf("Last after both flushes: %v, want %v", last, t1)
		}
		if h := f.host(t, id); h.LastConfigFetch == nil || !h.LastConfigFetch.Equal(t1) {
			t.Fatalf("stored: %v, want %v", h.LastConfigFetch, t1)
		}
		if n := st.calls.Load(); n != 2 {
			t.Fatalf("%d writes, want 2", n)
		}
		// An older fetch arriving late (a slow request) changes nothing.
		l.Seen(id, t0.Add(5*time.Second))
		l.Flush(ctx)
		if last, _ := l.Last(id); !last.Equal(t1) || st.calls.Load() != 2 {
			t.Fatalf("a late older fetch: Last %v, %d writes", last, st.calls.Load())
		}
	})
}

// failingFetches is a real store whose RecordConfigFetches fails while
// down is set.
type failingFetches struct {
	store.Store
	down atomic.Bool
}

func (s *failingFetches) RecordConfigFetches(ctx context.Context, f []store.ConfigFetch) error {
	if s.down.Load() {
		return store.ErrUnavailable
	}
	return s.Store.RecordConfigFetches(ctx, f)
}

// The batcher forgets a host unseen for a few intervals once its last
// fetch is written (a retired host, a box gone), so its memory follows
// the live fleet; a fetch not yet written is kept until it is.
func TestLivenessForgetsSilentHosts(t *testing.T) {
	f := newFleetFixture(t, "sqlite", HandlerConfig{})
	ctx := context.Background()
	st := &failingFetches{Store: f.st.Store}
	var mu sync.Mutex
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	l := NewLiveness(st, LivenessConfig{Flush: time.Minute}, clock, slog.New(slog.NewTextHandler(io.Discard, nil)))

	l.Seen(f.h1.ID, clock())
	l.Seen(f.h2.ID, clock())
	l.Flush(ctx)
	st.down.Store(true)
	advance(time.Minute)
	h2At := clock()
	l.Seen(f.h2.ID, h2At) // h2 fetched again; its write fails
	advance(pruneAfter*time.Minute + time.Second)
	l.Flush(ctx)
	if _, ok := l.Last(f.h1.ID); ok || l.size() != 1 {
		t.Fatalf("after %d silent intervals: h1 known %v, %d hosts kept, want h2 alone", pruneAfter, ok, l.size())
	}
	if _, ok := l.Last(f.h2.ID); !ok {
		t.Fatal("a host whose fetch is not written yet was forgotten")
	}
	st.down.Store(false)
	l.Flush(ctx)
	if h := f.host(t, f.h2.ID); h.LastConfigFetch == nil || !h.LastConfigFetch.Equal(h2At) {
		t.Fatalf("h2 stored %v", h.LastConfigFetch)
	}
	if l.size() != 0 {
		t.Fatalf("%d hosts kept once every write is done and all are silent", l.size())
	}
	// A forgotten host that fetches again is a change of state.
	if !l.Seen(f.h1.ID, clock()) {
		t.Fatal("a forgotten host's fetch is not written at once")
	}
}
