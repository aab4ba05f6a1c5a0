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
type Liveness struct {
	st  LivenessStore
	cfg LivenessConfig
	log *slog.Logger

	mu      sync.Mutex
	pending map[int64]time.Time // fetched since the last flush
	written map[int64]time.Time // last written by this batcher
}

// NewLiveness returns a batcher writing to st.
func NewLiveness(st LivenessStore, cfg LivenessConfig, log *slog.Logger) *Liveness {
	if cfg.Flush <= 0 {
		cfg.Flush = time.Minute
	}
	return &Liveness{st: st, cfg: cfg, log: log, pending: map[int64]time.Time{}, written: map[int64]time.Time{}}
}

// Seen records that host id's box fetched its configuration at at. It
// reports whether that changes the host's liveness state, so the fetch
// should be written now (Flush) rather than with the next batch: the
// first fetch of the host this replica sees (after a start, or the host's
// first ever), or the first after a silence longer than Flush.
func (l *Liveness) Seen(id int64, at time.Time) (now bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, known := l.pending[id]
	if !known {
		last, known = l.written[id]
	}
	l.pending[id] = at
	return !known || at.Sub(last) > l.cfg.Flush
}

// Last returns the latest fetch of host id this batcher knows, written or
// not; ok is false when it knows none.
func (l *Liveness) Last(id int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.pending[id]; ok {
		return t, true
	}
	t, ok := l.written[id]
	return t, ok
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

// Flush writes the pending fetches in one store call. On failure they stay
// pending (a newer fetch of the same host wins) for the next flush.
func (l *Liveness) Flush(ctx context.Context) {
	l.mu.Lock()
	batch := make([]store.ConfigFetch, 0, len(l.pending))
	for id, at := range l.pending {
		batch = append(batch, store.ConfigFetch{HostID: id, At: at})
	}
	clear(l.pending)
	l.mu.Unlock()
	var err error
	if len(batch) > 0 {
		err = l.st.RecordConfigFetches(ctx, batch)
	}
	l.mu.Lock()
	for _, f := range batch {
		if err != nil {
			if p, ok := l.pending[f.HostID]; !ok || p.Before(f.At) {
				l.pending[f.HostID] = f.At
			}
			continue
		}
		l.written[f.HostID] = f.At
	}
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
