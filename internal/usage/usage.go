// Package usage records one usage record per gateway request (SPEC §4) off
// the request path: Record hands a record to a bounded buffer and returns at
// once; Run writes the buffer to the store in batches.
//
// Accounting never slows or breaks serving. When the buffer is full, or the
// store refuses a batch, records are dropped and counted rather than
// queued without bound: a store outage costs usage rows, never memory or
// latency. A batch the store refuses because of the values in one row
// (store.ErrRejected) is written again row by row, so only that row is
// lost, and it is counted apart as rejected.
package usage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/defaults"
	"github.com/rolter/rolter/internal/store"
)

// Writer stores batches of usage records. InsertUsage must be all or
// nothing: a batch that returns an error is counted as not stored. An error
// that wraps store.ErrRejected says the values of some record were refused
// and that the others would go in; any other error is taken to mean the
// store cannot take records now. It is the subset of store.Store the
// Recorder needs.
type Writer interface {
	InsertUsage(ctx context.Context, recs []store.UsageRecord) error
}

// Config sizes the Recorder. Zero values take the defaults.
type Config struct {
	// Buffer is how many records may wait for the store (default 10000).
	// Records beyond it are dropped.
	Buffer int
	// Batch is the most records written in one InsertUsage (default 500).
	Batch int
	// Interval is the longest a record waits for a batch to fill
	// (default 1s).
	Interval time.Duration
	// WriteTimeout bounds one InsertUsage call (default 10s).
	WriteTimeout time.Duration
	// FlushTimeout bounds the final flush when Run stops (default 5s).
	FlushTimeout time.Duration
	// Ticks, when set, replaces the Interval ticker: each receive writes
	// what is buffered. Run receives from it only between writes, so a
	// test that has sent twice knows the first write has finished.
	Ticks <-chan time.Time
}

func (c *Config) setDefaults() {
	defaults.Set(&c.Buffer, 10000)
	defaults.Set(&c.Batch, 500)
	defaults.Set(&c.Interval, time.Second)
	defaults.Set(&c.WriteTimeout, 10*time.Second)
	defaults.Set(&c.FlushTimeout, 5*time.Second)
}

// errorLogEvery rate-limits the log line for refused batches: during an
// outage every batch fails, and one line per batch would flood the log.
const errorLogEvery = 10 * time.Second

// Recorder buffers usage records and writes them in batches. Record is safe
// for concurrent use; Run must be called exactly once.
type Recorder struct {
	// OnDrop, if set before Run (and before the Recorder is shared), is
	// called with the number of records dropped each time records are
	// dropped. It is called from Record's callers and from Run, so it must
	// be safe for concurrent use (a Prometheus counter's Add is).
	OnDrop func(n int)
	// OnReject, if set like OnDrop, is called with the number of records
	// the store refused for their values (store.ErrRejected), written one
	// by one after their batch failed. It is called from Run only. Rejected
	// records are not counted as dropped.
	OnReject func(n int)

	w   Writer
	cfg Config
	log *slog.Logger
	buf chan store.UsageRecord

	// mu orders Record's sends before the final flush: Record holds it
	// shared around its non-blocking send, flush takes it to set stopped,
	// so every record is either flushed or counted as dropped.
	mu      sync.RWMutex
	stopped bool

	started  atomic.Bool
	dropped  atomic.Uint64
	rejected atomic.Uint64
	written  atomic.Uint64

	// Owned by Run.
	lastErrLog time.Time
	unlogged   uint64 // records dropped by the store since lastErrLog
	lastRejLog time.Time
	unloggedRj uint64 // records rejected since lastRejLog
}

// New returns a Recorder writing to w. Nothing is written until Run.
func New(w Writer, cfg Config, log *slog.Logger) *Recorder {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{w: w, cfg: cfg, log: log, buf: make(chan store.UsageRecord, cfg.Buffer)}
}

// Record enqueues rec without ever blocking. When the buffer is full, or
// Run has returned, the record is dropped and counted.
func (r *Recorder) Record(rec store.UsageRecord) {
	r.mu.RLock()
	queued := false
	if !r.stopped {
		select {
		case r.buf <- rec:
			queued = true
		default:
		}
	}
	r.mu.RUnlock()
	if !queued {
		r.drop(1)
	}
}

// Dropped returns how many records were dropped: buffer full, Run stopped,
// or a batch the store refused.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Written returns how many records were stored.
func (r *Recorder) Written() uint64 { return r.written.Load() }

// Rejected returns how many records the store refused for their values.
// Every record Record was given ends up written, dropped or rejected.
func (r *Recorder) Rejected() uint64 { return r.rejected.Load() }

func (r *Recorder) drop(n int) {
	r.dropped.Add(uint64(n))
	if r.OnDrop != nil {
		r.OnDrop(n)
	}
}

// Run writes batches until ctx is cancelled, then flushes what is buffered
// within FlushTimeout and returns. A batch is written when it is full or
// when Interval has passed since the last write. Calling Run twice panics.
func (r *Recorder) Run(ctx context.Context) {
	if !r.started.CompareAndSwap(false, true) {
		panic("usage: Recorder.Run called twice")
	}
	// One slice for the Recorder's life: memory is Buffer + Batch records
	// whatever the traffic.
	batch := make([]store.UsageRecord, 0, r.cfg.Batch)
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	ticks := tick.C
	if r.cfg.Ticks != nil {
		tick.Stop()
		ticks = r.cfg.Ticks
	}
	// Writes outlive ctx so that a shutdown in the middle of a write does
	// not lose the batch; each is bounded by WriteTimeout instead.
	wctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			r.flush(wctx, batch)
			return
		case rec := <-r.buf:
			// Take what else is waiting without another trip through select.
			batch = r.fill(append(batch, rec))
			if len(batch) == cap(batch) {
				batch = r.write(wctx, batch, r.cfg.WriteTimeout)
				tick.Reset(r.cfg.Interval)
			}
		case <-ticks:
			if len(batch) > 0 {
				batch = r.write(wctx, batch, r.cfg.WriteTimeout)
			}
		}
	}
}

// fill appends buffered records to batch up to its capacity, without
// waiting for more.
func (r *Recorder) fill(batch []store.UsageRecord) []store.UsageRecord {
	for len(batch) < cap(batch) {
		select {
		case rec := <-r.buf:
			batch = append(batch, rec)
		default:
			return batch
		}
	}
	return batch
}

// flush stops Record from queueing, then writes batch and everything
// buffered, all within FlushTimeout; what does not fit in that time is
// dropped.
func (r *Recorder) flush(ctx context.Context, batch []store.UsageRecord) {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.FlushTimeout)
	defer cancel()
	for {
		if batch = r.fill(batch); len(batch) == 0 {
			return
		}
		batch = r.write(ctx, batch, r.cfg.FlushTimeout)
	}
}

// write stores batch, retrying once, and returns it emptied for reuse. A
// batch refused twice is dropped: retrying it for ever would let a store
// outage hold memory and delay every later record. A write that timed out
// is not retried: the store is too slow, and waiting again only drops more
// records at the buffer. A batch refused for the values of a record is not
// retried whole (it would fail the same way) but row by row, see rowByRow.
func (r *Recorder) write(ctx context.Context, batch []store.UsageRecord, timeout time.Duration) []store.UsageRecord {
	var err error
	for try := 0; try < 2; try++ {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err = r.w.InsertUsage(wctx, batch)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, store.ErrRejected) {
			break
		}
	}
	switch {
	case err == nil:
		r.written.Add(uint64(len(batch)))
	case errors.Is(err, store.ErrRejected):
		r.rowByRow(ctx, batch, timeout, err)
	default:
		r.drop(len(batch))
		r.logRefused(len(batch), err)
	}
	// Clear so the reused array does not pin the records' strings.
	clear(batch)
	return batch[:0]
}

// rowByRow writes the records of a batch the store rejected one at a time,
// all within timeout, so one bad record costs only itself. Records refused
// again with store.ErrRejected are rejected. The first error of another
// kind (the store went away, the time is up) drops that record and all
// after it without trying them: a store that cannot take a batch is not
// sent its rows one by one.
func (r *Recorder) rowByRow(ctx context.Context, batch []store.UsageRecord, timeout time.Duration, batchErr error) {
	if len(batch) == 1 {
		r.reject(1, batchErr)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rejected := 0
	for i := range batch {
		err := r.w.InsertUsage(ctx, batch[i:i+1])
		switch {
		case err == nil:
			r.written.Add(1)
			continue
		case errors.Is(err, store.ErrRejected):
			rejected++
			batchErr = err
			continue
		}
		r.drop(len(batch) - i)
		r.logRefused(len(batch)-i, err)
		break
	}
	if rejected > 0 {
		r.reject(rejected, batchErr)
	}
}

func (r *Recorder) reject(n int, err error) {
	r.rejected.Add(uint64(n))
	if r.OnReject != nil {
		r.OnReject(n)
	}
	r.unloggedRj += uint64(n)
	if now := time.Now(); now.Sub(r.lastRejLog) >= errorLogEvery {
		// err names the refused value's kind, not the value: neither driver
		// puts the row's content in its message.
		r.log.Warn("usage records rejected: the store refused their values; the rest of their batch was stored",
			"rejected", r.unloggedRj, "rejected_total", r.Rejected(), "err", err)
		r.lastRejLog, r.unloggedRj = now, 0
	}
}

func (r *Recorder) logRefused(n int, err error) {
	r.unlogged += uint64(n)
	if now := time.Now(); now.Sub(r.lastErrLog) >= errorLogEvery {
		r.log.Error("usage records dropped: the store refused a batch", "dropped", r.unlogged,
			"dropped_total", r.Dropped(), "err", err)
		r.lastErrLog, r.unlogged = now, 0
	}
}
