package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// Liveness batching.
//
// Each GET /vllm/config is a sign of life of the box's hosts
// (last_config_fetch: the admin view's liveness and the
// rolter_fleet_host_liveness_age_seconds gauge). Writing it per request
// would be a store write per box every few seconds; instead the fetches
// are kept in memory and written together, every Flush interval (default
// 1 minute), all hosts in one transaction: at most one write per host per
// interval. A change of liveness state is written at once, by the request
// that saw it: the first fetch of a host this replica sees (its first
// ever, or the first after a restart), or the first after a silence
// longer than Flush, so the admin view never shows a box that is back as
// silent for a further minute.
//
// The staleness bound: last_config_fetch in the store may lag a box's
// latest fetch by up to Flush (plus the write itself); on the replica the
// box talks to, Seen is exact. Nothing deregisters a host on its liveness
// (the controller's probes do), so the lag changes no routing.

// LivenessStore is the store method the batcher writes through.
type LivenessStore interface {
	RecordConfigFetches(ctx context.Context, fetches []store.ConfigFetch) error
}

// LivenessConfig tunes the batcher.
type LivenessConfig struct {
	// Flush is the interval between writes (default 1 minute).
	Flush time.Duration
	// Ticks, when set, is received from in addition to the Flush ticker,
	// each receive flushing once (tests).
	Ticks <-chan time.Time
	// Flushed, when set, is called after each flush attempt with the
	// number of hosts written (0 for none) and the error (tests).
	Flushed func(n int, err error)
}

// Liveness batches last_config_fetch writes. Create it with NewLiveness
// and run Run; safe for concurrent use.
//
// It keeps, per host, the latest fetch seen, which only moves forward, and
// whether a fetch newer than the last one written is pending (dirty): the
// next flush writes the latest seen. A flush never moves anything back,
// whatever order fetches and flushes finish in; flushes run one at a time,
// and the store keeps the later of two times (RecordConfigFetches). A host not seen for
// pruneAfter intervals is forgotten once written (a retired host, a box
// gone): its next fetch, if any, is a change of state and written at once,
// as it would be anyway after such a silence.
type Liveness struct {
	st  LivenessStore
	cfg LivenessConfig
	log *slog.Logger
	now func() time.Time

	flushMu sync.Mutex // held for a whole flush: one at a time

	mu    sync.Mutex
	seen  map[int64]time.Time // latest fetch per host
	dirty map[int64]struct{}  // hosts with a fetch newer than the last written
}

// pruneAfter is how many Flush intervals a host may stay unseen before
// the batcher forgets it.
const pruneAfter = 3

// NewLiveness returns a batcher writing to st, timed by now (nil:
// time.Now) for forgetting silent hosts.
func NewLiveness(st LivenessStore, cfg LivenessConfig, now func() time.Time, log *slog.Logger) *Liveness {
	if cfg.Flush <= 0 {
		cfg.Flush = time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Liveness{st: st, cfg: cfg, log: log, now: now,
		seen: map[int64]time.Time{}, dirty: map[int64]struct{}{}}
}

// Seen records that host id's box fetched its configuration at at. It
// reports whether that changes the host's liveness state, so the fetch
// should be written now (Flush) rather than with the next batch: the
// first fetch of the host this replica knows of (after a start, or the
// host's first ever), or the first after a silence longer than Flush.
func (l *Liveness) Seen(id int64, at time.Time) (now bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, known := l.seen[id]
	if !known || at.After(last) {
		l.seen[id] = at
		l.dirty[id] = struct{}{}
	}
	return !known || at.Sub(last) > l.cfg.Flush
}

// Last returns the latest fetch of host id this batcher knows, written or
// not; ok is false when it knows none.
func (l *Liveness) Last(id int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[id]
	return t, ok
}

// size is how many hosts the batcher remembers (tests).
func (l *Liveness) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// Run flushes every Flush interval until ctx ends; then it flushes what
// is left.
func (l *Liveness) Run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Flush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last fetches outlive the context they were seen under.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.Flush(fctx)
			cancel()
			return
		case <-t.C:
		case <-l.cfg.Ticks:
		}
		l.Flush(ctx)
	}
}

// Flush writes the dirty hosts' latest fetches in one store call, after
// any flush under way. On failure they stay dirty for the next flush.
func (l *Liveness) Flush(ctx context.Context) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	batch := make([]store.ConfigFetch, 0, len(l.dirty))
	for id := range l.dirty {
		batch = append(batch, store.ConfigFetch{HostID: id, At: l.seen[id]})
	}
	clear(l.dirty)
	l.mu.Unlock()
	var err error
	if len(batch) > 0 {
		err = l.st.RecordConfigFetches(ctx, batch)
	}
	l.mu.Lock()
	if err != nil {
		for _, f := range batch {
			l.dirty[f.HostID] = struct{}{} // seen is f.At or newer
		}
	}
	l.prune()
	l.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		l.log.Warn("fleet liveness write failed; kept for the next flush", "hosts", len(batch), "err", err)
	}
	if l.cfg.Flushed != nil {
		if err != nil {
			l.cfg.Flushed(0, err)
		} else {
			l.cfg.Flushed(len(batch), nil)
		}
	}
}

// prune forgets the written hosts not seen for pruneAfter intervals. l.mu
// is held.
func (l *Liveness) prune() {
	before := l.now().Add(-pruneAfter * l.cfg.Flush)
	for id, t := range l.seen {
		if _, dirty := l.dirty[id]; !dirty && t.Before(before) {
			delete(l.seen, id)
		}
	}
}
