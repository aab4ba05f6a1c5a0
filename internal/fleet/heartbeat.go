package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// Heartbeat batching.
//
// A box at rest sends its unchanged report once a minute (the agent's
// heartbeat), which moves its hosts' reported_at and nothing else. At
// 1,000 boxes that was ~17 store transactions a second, each alone;
// instead the heartbeats are queued in memory, one entry per host (the
// latest time), and written together every Flush interval (default 1
// second), or as soon as MaxQueued hosts wait: one transaction per
// interval. A changed report is still written at once (Handler.report).
//
// The staleness bound: reported_at in the store lags a heartbeat by up to
// Flush plus the write. Nothing reads reported_at to decide routing or
// liveness (the controller's probes and last_config_fetch do): the admin
// view and the UI show it, and judging a report on the store (Handler
// report) at worst writes a report again that a queued heartbeat would
// have made fresh.

// HeartbeatStore is the store method the heartbeat batcher writes through.
type HeartbeatStore interface {
	RecordHeartbeats(ctx context.Context, beats []store.Heartbeat) error
}

// HeartbeatConfig tunes the heartbeat batcher.
type HeartbeatConfig struct {
	// Flush is the interval between writes (default 1 second).
	Flush time.Duration
	// MaxQueued is how many hosts may wait before a write is started at
	// once (default 1,000).
	MaxQueued int
	// Ticks, when set, is received from in addition to the Flush ticker,
	// each receive flushing once (tests).
	Ticks <-chan time.Time
	// Flushed, when set, is called after each flush attempt that had
	// something to write, with the number of hosts written (0 on error)
	// and the error (tests).
	Flushed func(n int, err error)
}

// Heartbeats queues the reported_at of unchanged reports and writes them
// in batches. Create it with NewHeartbeats and run Run; safe for
// concurrent use.
//
// The queue holds one entry per host id, its latest heartbeat, so it is
// bounded by the fleet whatever the store does: a failed write keeps its
// entries for the next flush (a newer heartbeat of the same host replaces
// its entry). Times never move back (RecordHeartbeats keeps the later).
// Once Run has returned, after its last flush, Beat refuses, so the
// caller writes the heartbeat itself rather than leave it queued.
type Heartbeats struct {
	st  HeartbeatStore
	cfg HeartbeatConfig
	log *slog.Logger

	flushMu sync.Mutex // held for a whole flush: one at a time
	kick    chan struct{}

	mu     sync.Mutex
	queued map[int64]time.Time
	closed bool
}

// NewHeartbeats returns a batcher writing to st.
func NewHeartbeats(st HeartbeatStore, cfg HeartbeatConfig, log *slog.Logger) *Heartbeats {
	if cfg.Flush <= 0 {
		cfg.Flush = time.Second
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 1000
	}
	return &Heartbeats{st: st, cfg: cfg, log: log, kick: make(chan struct{}, 1), queued: map[int64]time.Time{}}
}

// Beat queues at as the heartbeat of hosts ids. It reports false when
// the batcher has stopped (Run returned): nothing was queued.
func (b *Heartbeats) Beat(ids []int64, at time.Time) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	for _, id := range ids {
		if t, ok := b.queued[id]; !ok || at.After(t) {
			b.queued[id] = at
		}
	}
	full := len(b.queued) >= b.cfg.MaxQueued
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default: // a flush is asked for already
		}
	}
	return true
}

// Run flushes every Flush interval, and when MaxQueued hosts wait, until
// ctx ends; then it flushes what is left and refuses further beats.
func (b *Heartbeats) Run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Flush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.closed = true
			b.mu.Unlock()
			// The last heartbeats outlive the context they were queued under.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			b.Flush(fctx)
			cancel()
			return
		case <-t.C:
		case <-b.kick:
		case <-b.cfg.Ticks:
		}
		b.Flush(ctx)
	}
}

// Flush writes the queued heartbeats in one store call, after any flush
// under way. On failure they are queued again, unless a newer heartbeat
// of the same host came in meanwhile.
func (b *Heartbeats) Flush(ctx context.Context) {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	if len(b.queued) == 0 {
		b.mu.Unlock()
		return
	}
	batch := make([]store.Heartbeat, 0, len(b.queued))
	for id, at := range b.queued {
		batch = append(batch, store.Heartbeat{HostID: id, At: at})
	}
	clear(b.queued)
	b.mu.Unlock()
	err := b.st.RecordHeartbeats(ctx, batch)
	if err != nil {
		b.mu.Lock()
		for _, hb := range batch {
			if t, ok := b.queued[hb.HostID]; !ok || hb.At.After(t) {
				b.queued[hb.HostID] = hb.At
			}
		}
		b.mu.Unlock()
		if ctx.Err() == nil {
			b.log.Warn("fleet heartbeat write failed; kept for the next flush", "hosts", len(batch), "err", err)
		}
	}
	if b.cfg.Flushed != nil {
		if err != nil {
			b.cfg.Flushed(0, err)
		} else {
			b.cfg.Flushed(len(batch), nil)
		}
	}
}

// pending is how many hosts wait to be written (tests).
func (b *Heartbeats) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queued)
}
