package spend

import (
	"context"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/money"
)

// StoreCounter is a Counter on the usage table: no service beyond the
// store. Each scope's spend in a period is read from the store on first
// use (so it survives restarts), then this replica's costs are added in
// memory, and Run re-reads the store every refresh interval to see other
// replicas' spend.
//
// The estimate is max(last read, first read + this replica's costs since):
// exact for a single replica, and never above the true spend. Across
// replicas it lags by at most the refresh interval plus the usage flush
// interval (1s by default). A cost added for a period this replica never
// checked is left to the store, which has it once the record is flushed.
type StoreCounter struct {
	st      Summer
	refresh time.Duration
	now     func() time.Time

	mu      sync.Mutex
	entries map[entryKey]*entry
}

type entryKey struct {
	scope Scope
	start int64 // period start, Unix seconds
}

type entry struct {
	start, end time.Time
	loaded     bool
	loading    chan struct{} // closed when the first read ends; nil before it starts
	first      money.Amount  // the store's sum at the first read
	local      money.Amount  // this replica's costs since the first read began
	last       money.Amount  // the store's sum at the latest read
	used       time.Time
}

// idleFor is how long an entry nobody checks is kept and refreshed.
const idleFor = time.Hour

// NewStoreCounter returns a StoreCounter; refresh is how often Run
// re-reads the store (default 5s).
func NewStoreCounter(st Summer, refresh time.Duration, now func() time.Time) *StoreCounter {
	if refresh <= 0 {
		refresh = 5 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &StoreCounter{st: st, refresh: refresh, now: now, entries: map[entryKey]*entry{}}
}

// Spent implements Counter. The first call for a scope and period reads
// the store; concurrent callers wait for that one read.
func (c *StoreCounter) Spent(ctx context.Context, s Scope, start, end time.Time) (money.Amount, error) {
	k := entryKey{s, start.Unix()}
	c.mu.Lock()
	e := c.entries[k]
	if e == nil {
		e = &entry{start: start, end: end}
		c.entries[k] = e
	}
	e.used = c.now()
	if e.loaded {
		v := e.estimate()
		c.mu.Unlock()
		return v, nil
	}
	wait := e.loading
	if wait == nil {
		e.loading = make(chan struct{})
	}
	c.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if !e.loaded {
			return 0, errNotLoaded
		}
		return e.estimate(), nil
	}
	v, err := spentSince(ctx, c.st, s, start)
	c.mu.Lock()
	defer c.mu.Unlock()
	close(e.loading)
	if err != nil {
		e.loading = nil // the next caller tries again
		return 0, err
	}
	e.loaded, e.first, e.last = true, v, v
	return e.estimate(), nil
}

type loadError struct{}

func (loadError) Error() string { return "spend: the store read of this budget failed" }

var errNotLoaded error = loadError{}

func (e *entry) estimate() money.Amount { return max(e.last, e.first+e.local) }

// Add implements Counter; it never fails.
func (c *StoreCounter) Add(_ context.Context, s Scope, start, _ time.Time, cost money.Amount) error {
	c.mu.Lock()
	if e := c.entries[entryKey{s, start.Unix()}]; e != nil && e.loading != nil {
		e.local += cost
	}
	c.mu.Unlock()
	return nil
}

// Run re-reads the spend of every recently checked scope from the store
// every refresh interval and forgets periods that ended or that nobody
// checked for an hour, until ctx is done.
func (c *StoreCounter) Run(ctx context.Context) {
	tick := time.NewTicker(c.refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.Refresh(ctx)
		}
	}
}

// Refresh runs one round of Run.
func (c *StoreCounter) Refresh(ctx context.Context) {
	now := c.now()
	type job struct {
		k entryKey
		e *entry
	}
	var jobs []job
	c.mu.Lock()
	for k, e := range c.entries {
		switch {
		case !e.end.After(now) || now.Sub(e.used) > idleFor:
			if e.loaded || e.loading == nil {
				delete(c.entries, k)
			}
		case e.loaded:
			jobs = append(jobs, job{k, e})
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		v, err := spentSince(ctx, c.st, j.k.scope, j.e.start)
		if err != nil {
			continue // keep the last figure; the next round retries
		}
		c.mu.Lock()
		j.e.last = max(j.e.last, v)
		c.mu.Unlock()
	}
}
