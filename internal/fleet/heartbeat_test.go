package fleet

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// failingBeats is a real store whose heartbeat writes fail while fail is
// set.
type failingBeats struct {
	store.Store
	fail  atomic.Bool
	calls atomic.Int64
}

func (f *failingBeats) RecordHeartbeats(ctx context.Context, b []store.Heartbeat) error {
	f.calls.Add(1)
	if f.fail.Load() {
		return store.ErrUnavailable
	}
	return f.Store.RecordHeartbeats(ctx, b)
}

// Heartbeats keep one entry per host (the latest), write them in one
// call per flush, keep them through a failed write without growing, flush
// early when MaxQueued hosts wait, write what is left when Run ends, and
// refuse beats after that so none is left queued unwritten.
func TestHeartbeatsBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		f := newFleetFixture(t, dialect, HandlerConfig{})
		st := &failingBeats{Store: f.st.Store}
		ticks := make(chan time.Time)
		flushed := make(chan int, 16)
		b := NewHeartbeats(st, HeartbeatConfig{Flush: time.Hour, MaxQueued: 3, Ticks: ticks,
			Flushed: func(n int, err error) { flushed <- n }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		base := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
		reportedAt := func(id int64) time.Time {
			t.Helper()
			x, err := st.GetHost(ctx, f.org, id)
			if err != nil || x.ReportedAt == nil {
				t.Fatalf("host %d: %v %v", id, x, err)
			}
			return *x.ReportedAt
		}
		must(t, st.RecordHostReports(ctx, []store.HostReportEntry{{HostID: f.h1.ID}, {HostID: f.h2.ID}, {HostID: f.h3.ID}}, base))

		// Many beats of two hosts: two entries, the latest times.
		st.fail.Store(true)
		for i := range 100 {
			if !b.Beat([]int64{f.h1.ID, f.h2.ID}, base.Add(time.Duration(i)*time.Second)) {
				t.Fatal("a running batcher refused a beat")
			}
		}
		b.Beat([]int64{f.h1.ID}, base.Add(time.Second)) // late: changes nothing
		if n := b.pending(); n != 2 {
			t.Fatalf("queued %d, want 2 (one per host)", n)
		}
		b.Flush(ctx)
		if n := b.pending(); n != 2 || st.calls.Load() != 1 || <-flushed != 0 {
			t.Fatalf("after a failed write: %d queued, %d calls", n, st.calls.Load())
		}
		st.fail.Store(false)

		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.Run(runCtx)
		}()
		ticks <- time.Time{}
		if n := <-flushed; n != 2 || b.pending() != 0 {
			t.Fatalf("a tick wrote %d hosts, %d left", n, b.pending())
		}
		if got, want := reportedAt(f.h1.ID), base.Add(99*time.Second); !got.Equal(want) {
			t.Fatalf("host 1 reported_at %v, want %v", got, want)
		}
		// MaxQueued hosts waiting: written without a tick.
		b.Beat([]int64{f.h1.ID, f.h2.ID, f.h3.ID}, base.Add(200*time.Second))
		if n := <-flushed; n != 3 {
			t.Fatalf("a full queue wrote %d hosts, want 3", n)
		}
		// Shutdown writes what is queued, then refuses.
		b.Beat([]int64{f.h3.ID}, base.Add(300*time.Second))
		stop()
		<-done
		if n := <-flushed; n != 1 {
			t.Fatalf("shutdown wrote %d hosts, want 1", n)
		}
		if got, want := reportedAt(f.h3.ID), base.Add(300*time.Second); !got.Equal(want) {
			t.Fatalf("host 3 reported_at %v, want %v", got, want)
		}
		if b.Beat([]int64{f.h3.ID}, base.Add(400*time.Second)) || b.pending() != 0 {
			t.Fatal("a stopped batcher queued a beat")
		}
	})
}
