// Package spend enforces budgets: what a virtual key or a project may spend
// per UTC calendar period.
//
// A Tracker checks a request's budgets before it is forwarded and adds the
// request's cost when it ends. The running spend lives in a Counter, which
// decides how spend is shared:
//
//   - StoreCounter reads each budgeted scope's spend from the usage table
//     (the sum of cost since the period start) on first use and every few
//     seconds after, and adds this replica's costs in memory in between.
//     It needs no other service, survives restarts (the usage table is the
//     record) and converges across replicas within the refresh interval
//     plus the usage flush interval.
//   - RedisCounter keeps one integer per scope and period in Redis
//     (INCRBY, expiring after the period), seeded from the usage table, so
//     every replica sees every other's spend at once.
//
// Budgets are soft by one request: the cost is known only when a request
// ends, so requests already admitted when the budget runs out finish and
// are billed; the next ones are refused until the period resets.
package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// Scope is whose spend a budget caps.
type Scope struct {
	Kind string // "key" or "project"
	ID   int64
}

// Scope kinds.
const (
	KindKey     = "key"
	KindProject = "project"
)

func (s Scope) String() string { return fmt.Sprintf("%s:%d", s.Kind, s.ID) }

// Counter holds the spend of scopes per period. Spent and Add run on the
// request path: an implementation answers from memory or one fast round
// trip, and returns an error rather than wait long.
type Counter interface {
	// Spent returns scope's spend in the period [start, end).
	Spent(ctx context.Context, s Scope, start, end time.Time) (money.Amount, error)
	// Add counts cost against scope in the period [start, end).
	Add(ctx context.Context, s Scope, start, end time.Time, cost money.Amount) error
}

// Summer is the part of store.Store the counters read spend from.
type Summer interface {
	SpentSince(ctx context.Context, keyID, projectID int64, since time.Time) (money.Amount, error)
}

// spentSince reads scope's spend since start from the usage table.
func spentSince(ctx context.Context, st Summer, s Scope, start time.Time) (money.Amount, error) {
	if s.Kind == KindKey {
		return st.SpentSince(ctx, s.ID, 0, start)
	}
	return st.SpentSince(ctx, 0, s.ID, start)
}

// Period returns the UTC calendar period of kind ("day", "week" or
// "month") that contains now: days start at 00:00 UTC, weeks on Monday
// 00:00 UTC (ISO weeks), months on the 1st at 00:00 UTC.
func Period(kind string, now time.Time) (start, end time.Time) {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch kind {
	case store.PeriodWeek:
		start = day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
		return start, start.AddDate(0, 0, 7)
	case store.PeriodMonth:
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	return day, day.AddDate(0, 0, 1)
}

// Limit is one budget that applies to a request.
type Limit struct {
	Scope  Scope
	Name   string // the key's or project's name, for the refusal message
	Budget store.Budget
}

// Exceeded is a refusal: scope has spent its budget until Reset.
type Exceeded struct {
	Limit
	Spent money.Amount
	Reset time.Time
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("the budget of %s %q is spent: $%s of $%s this %s; it resets at %s",
		e.Scope.Kind, e.Name, e.Spent.USD(), e.Budget.Amount.USD(), e.Budget.Period, e.Reset.Format(time.RFC3339))
}

// Tracker checks and charges budgets against a Counter.
type Tracker struct {
	c        Counter
	fallback Counter
	log      *slog.Logger
	now      func() time.Time
	// failing is set while the counter fails, so an outage logs once.
	failing atomic.Bool
	// lastTry is when (t.now, Unix nanoseconds) the counter last failed
	// or was last tried again during an outage.
	lastTry atomic.Int64
	errors  atomic.Uint64
}

// retryEvery is how often, during an outage of the counter, one check
// tries it again. The other checks and every Add go straight to the
// fallback, so an outage costs at most one request per interval the
// counter's timeout, and never a request two of them.
const retryEvery = time.Second

// NewTracker returns a Tracker over c. When c fails, fallback (if not nil)
// answers instead; with neither answering, the request is let through (a
// counter outage must not stop serving) and the failure is logged once per
// outage and counted in Errors. During an outage c is tried again by one
// check a second; costs go to the fallback only, so a shared counter that
// comes back lacks the outage's costs (a Redis counter is seeded from the
// usage table only when it is missing).
func NewTracker(c, fallback Counter, log *slog.Logger, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{c: c, fallback: fallback, log: log, now: now}
}

// Errors counts counter failures (for a metric).
func (t *Tracker) Errors() uint64 { return t.errors.Load() }

// Check returns the first of limits whose budget is spent, or nil.
func (t *Tracker) Check(ctx context.Context, limits []Limit) *Exceeded {
	now := t.now()
	for _, l := range limits {
		start, end := Period(l.Budget.Period, now)
		spent, err := money.Amount(0), errSkipped
		if t.tryCounter(now) {
			// Only the counter's answer ends an outage: a fallback that
			// answers during one must not log it over at every request.
			if spent, err = t.c.Spent(ctx, l.Scope, start, end); err == nil {
				t.recovered()
			} else {
				t.failed(err)
			}
		}
		if err != nil {
			if t.fallback == nil {
				continue
			}
			if spent, err = t.fallback.Spent(ctx, l.Scope, start, end); err != nil {
				t.failed(err)
				continue
			}
		}
		if spent >= l.Budget.Amount {
			return &Exceeded{Limit: l, Spent: spent, Reset: end}
		}
	}
	return nil
}

// Add charges cost to every limit's scope in the current period.
func (t *Tracker) Add(ctx context.Context, limits []Limit, cost money.Amount) {
	if cost <= 0 {
		return
	}
	now := t.now()
	for _, l := range limits {
		start, end := Period(l.Budget.Period, now)
		// The fallback first: it answers from memory, so a check that
		// falls back while the primary's Add waits out its timeout
		// already sees this cost.
		if t.fallback != nil {
			_ = t.fallback.Add(ctx, l.Scope, start, end, cost)
		}
		if t.failing.Load() {
			continue // lost to the counter: see Tracker
		}
		if err := t.c.Add(ctx, l.Scope, start, end, cost); err != nil {
			t.failed(err)
		}
	}
}

// errSkipped stands for the counter's answer when it was not asked.
var errSkipped = errors.New("skipped during the counter's outage")

// tryCounter reports whether a check at now asks the counter: always
// while it answers, and once per retryEvery during an outage.
func (t *Tracker) tryCounter(now time.Time) bool {
	if !t.failing.Load() {
		return true
	}
	last := t.lastTry.Load()
	return now.UnixNano()-last >= int64(retryEvery) && t.lastTry.CompareAndSwap(last, now.UnixNano())
}

func (t *Tracker) failed(err error) {
	t.errors.Add(1)
	t.lastTry.Store(t.now().UnixNano())
	if !t.failing.Swap(true) && t.log != nil {
		t.log.Warn("budget counter unavailable; budgets are checked against the fallback or not at all until it answers", "err", err)
	}
}

func (t *Tracker) recovered() {
	if t.failing.Load() && t.failing.Swap(false) && t.log != nil {
		t.log.Info("budget counter answers again")
	}
}
