// Package cooldown is the gateway's circuit breaker. The gateway keeps one
// Breaker per upstream key and one per target; a Breaker decides whether a
// request may be sent there now, and learns from how each request ended.
//
// # State machine
//
//	         Threshold consecutive Failures,
//	         one Trip, or RateLimited (429)
//	closed ─────────────────────────────────▶ cooling ◀──────────────┐
//	  ▲                                          │                   │
//	  │                                          │ cooldown ends     │ probe Failure
//	  │                                          ▼                   │ (next level),
//	  └─────────── probe Success ────────── half-open ───────────────┘ probe 429
//
// In words:
//   - closed: every Allow is admitted. Failures are counted; a Success resets
//     the count. The Threshold-th consecutive Failure cools the breaker for
//     Base*2^level (capped at Max) and raises the level.
//   - cooling: no Allow is admitted until Until.
//   - half-open: the cooldown has ended. Exactly one Allow is admitted as the
//     probe; every other Allow is refused until the probe reports. Success
//     closes the breaker and resets the level; Failure cools it again at the
//     next level; a 429 cools it for the upstream's Retry-After; Abandon
//     (the client went away) hands the probe to the next caller.
//
// A 429 cools the breaker at once from any state, for the upstream's
// Retry-After when it sent one (uncapped: the upstream knows its quota
// better than our Max does) and for Base otherwise. It does not raise the
// level: being rate limited says nothing about the upstream's health.
//
// No cooldown ever shortens another: the end of a cooldown is the later of
// the current end and the new one.
//
// # Stale verdicts
//
// While the breaker is open (cooling or half-open) Allow admits nobody but
// the probe, so a Success or Failure reported while no probe is outstanding
// belongs to a request admitted before the breaker opened. Such verdicts are
// ignored: a burst of in-flight requests failing together opens the breaker
// once instead of climbing the backoff ladder, and a late Success cannot cut
// short a cooldown (in particular a 429's Retry-After). A late 429 is still
// honoured, because whenever it was sent it is the upstream saying when to
// come back.
//
// The Breaker cannot tell callers apart, so while a probe is outstanding the
// first verdict reported is taken as the probe's. Callers therefore report
// exactly one verdict per admitted request (Success, Failure or RateLimited),
// call Abandon only when they held the probe, and report nothing for a
// non-probe request that ended without a verdict.
package cooldown

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/clock"
)

// Config tunes a Breaker. Zero fields take their defaults.
type Config struct {
	// Threshold is how many consecutive failures cool a closed breaker
	// (default 3).
	Threshold int
	// Base is the first cooldown after Threshold failures, and the
	// cooldown for a 429 without Retry-After (default 5s).
	Base time.Duration
	// Max caps the exponential growth of failure cooldowns (default 5m). It
	// does not cap an explicit Retry-After.
	Max time.Duration
}

// Defaults for the zero fields of Config.
const (
	DefaultThreshold = 3
	DefaultBase      = 5 * time.Second
	DefaultMax       = 5 * time.Minute
)

// Values returned by Breaker.State.
const (
	StateClosed   = "closed"
	StateCooling  = "cooling"
	StateHalfOpen = "half_open"
)

// The whole state a reader needs lives in one word so that Allow is a
// single atomic load when healthy, and so that handing out the probe (a CAS
// on that word) is tied to the very cooldown the caller saw elapse:
//
//	word = until<<1 | probeBit, or 0 when closed
//
// until is nanoseconds since the Breaker's epoch (always >= 1 when open).
const (
	probeBit       = 1
	maxUntil int64 = math.MaxInt64 >> 1
)

// Breaker tracks one upstream key or one target. Create it with New. Safe for
// concurrent use.
//
// Allow and Success on a healthy breaker take no lock and do not allocate;
// everything else takes a mutex, which is fine because it happens only
// when something went wrong.
type Breaker struct {
	word atomic.Int64
	// fails counts consecutive failures while closed. Written under mu; read
	// without it by Success's fast path.
	fails atomic.Int64

	mu    sync.Mutex
	level int // guarded by mu; doublings applied to the next failure cooldown

	cfg Config
	clk clock.Clock
	// epoch anchors until. With clock.System it carries a monotonic reading,
	// so a wall-clock step does not stretch or cut a cooldown.
	epoch time.Time
}

// New returns a closed Breaker. Zero fields of cfg take their defaults; a nil
// clk is clock.System.
func New(cfg Config, clk clock.Clock) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Base <= 0 {
		cfg.Base = DefaultBase
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Max < cfg.Base {
		cfg.Max = cfg.Base
	}
	if clk == nil {
		clk = clock.System
	}
	return &Breaker{cfg: cfg, clk: clk, epoch: clk.Now()}
}

func (b *Breaker) now() int64 { return int64(b.clk.Now().Sub(b.epoch)) }

// Allow reports whether a request may be sent now. probe is true for the one
// caller admitted in half-open state; that caller must report the request's
// verdict (Success, Failure, RateLimited) or call Abandon, or the breaker
// stays shut.
func (b *Breaker) Allow() (ok, probe bool) {
	for {
		w := b.word.Load()
		if w == 0 {
			return true, false
		}
		if w&probeBit != 0 || b.now() < w>>1 {
			return false, false
		}
		if b.word.CompareAndSwap(w, w|probeBit) {
			return true, true
		}
		// The word changed under us (another caller took the probe, or a
		// verdict landed); decide again on the new state.
	}
}

// Success records a successful response. From closed it resets the failure
// count; from the probe it closes the breaker and resets the backoff level.
// A stale Success (see the package doc) is ignored.
func (b *Breaker) Success() {
	if b.word.Load() == 0 && b.fails.Load() == 0 {
		return // healthy: the per-request common case stays lock-free
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	switch {
	case w&probeBit != 0:
		// Under mu with the probe held nothing else can change the word.
		b.word.Store(0)
		b.level = 0
		b.fails.Store(0)
	case w != 0:
		// Stale: admitted before the breaker opened.
	default:
		b.fails.Store(0)
	}
}

// Failure records a failure that counts against the upstream (connect error,
// timeout, 5xx). The Threshold-th consecutive failure while closed, or a
// failed probe, cools the breaker for Base*2^level capped at Max, and raises
// the level. A stale Failure (see the package doc) is ignored.
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.word.Load()
	switch {
	case w&probeBit != 0:
		b.coolFor(b.nextBackoff())
	case w != 0:
		// Stale: admitted before the breaker opened.
	default:
		if b.fails.Add(1) >= int64(b.cfg.Threshold) {
			b.coolFor(b.nextBackoff())
		}
	}
}

// Trip records a failure that is certain on its own, such as a refused
// connection: nothing listens there, so waiting for Threshold failures
// would only send more requests to it. A closed breaker cools at once for
// Base*2^level (capped at Max) and raises the level, as a failed probe
// does; a Trip reported while the breaker is open without a probe out is
// stale and ignored, like a stale Failure.
func (b *Breaker) Trip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.word.Load(); w != 0 && w&probeBit == 0 {
		return // stale: admitted before the breaker opened
	}
	b.coolFor(b.nextBackoff())
}

// RateLimited records a 429. It cools the breaker at once, from any state,
// for retryAfter when positive (not capped at Max) and for Base otherwise,
// and releases the probe if one was out. It never shortens a cooldown, and
// does not raise the backoff level.
func (b *Breaker) RateLimited(retryAfter time.Duration) {
	d := retryAfter
	if d <= 0 {
		d = b.cfg.Base
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.coolFor(d)
}

// Refused records that the upstream refused the credential (401, 403): it
// cools the breaker at once, from any state, for d (not capped at Max),
// and releases the probe. Like RateLimited it never shortens a cooldown
// and does not raise the backoff level: the key is not failing, it is
// wrong until someone edits it.
func (b *Breaker) Refused(d time.Duration) {
	b.RateLimited(d)
}

// Abandon releases the probe of a request that ended without a verdict (the
// client cancelled), so the next caller may probe. It counts as neither
// success nor failure. It is a no-op when no probe is outstanding; call it
// only when Allow returned probe=true.
func (b *Breaker) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Under mu with the probe held nothing else can change the word, and
	// without it there is nothing to release.
	if w := b.word.Load(); w&probeBit != 0 {
		b.word.Store(w &^ probeBit)
	}
}

// Until is the end of the current cooldown, or the zero time when closed. In
// half-open state it is in the past. The gateway uses it for panic mode: when
// every candidate is cooling, it tries the one whose cooldown ends first.
func (b *Breaker) Until() time.Time {
	w := b.word.Load()
	if w == 0 {
		return time.Time{}
	}
	return b.epoch.Add(time.Duration(w >> 1))
}

// State returns StateClosed, StateCooling or StateHalfOpen, for metrics.
func (b *Breaker) State() string {
	w := b.word.Load()
	switch {
	case w == 0:
		return StateClosed
	case b.now() < w>>1:
		return StateCooling
	default:
		return StateHalfOpen
	}
}

// nextBackoff returns the cooldown for a failure at the current level and
// raises the level, unless the cap is already reached (so level cannot grow
// without bound while the upstream stays down). Caller holds mu.
func (b *Breaker) nextBackoff() time.Duration {
	d := b.cfg.Base
	for i := 0; i < b.level && d < b.cfg.Max; i++ {
		if d > b.cfg.Max/2 {
			d = b.cfg.Max
			break
		}
		d *= 2
	}
	if d >= b.cfg.Max {
		return b.cfg.Max
	}
	b.level++
	return d
}

// coolFor moves the cooldown's end to at least now+d, releases any probe and
// clears the failure count. Caller holds mu.
func (b *Breaker) coolFor(d time.Duration) {
	until := maxUntil
	if now := b.now(); int64(d) < maxUntil-now {
		until = max(now+int64(d), 1)
	}
	b.fails.Store(0)
	for {
		// Allow may set the probe bit concurrently, hence the CAS; the bit is
		// dropped either way, because this verdict is the probe's.
		w := b.word.Load()
		if b.word.CompareAndSwap(w, max(until, w>>1)<<1) {
			return
		}
	}
}
