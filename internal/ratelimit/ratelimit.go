// Package ratelimit enforces requests- and tokens-per-minute limits with
// the generic cell rate algorithm (GCRA), in memory (Local) or shared by
// every replica through Redis (Redis, which falls back to Local while Redis
// is unreachable or slow).
//
// # The algorithm
//
// A limit of R units per minute is a bucket that holds one minute's worth
// (R units) and refills continuously at R per minute. GCRA keeps a single
// number per limit, the theoretical arrival time TAT: the moment the
// bucket would be full again. With T = 60s/R and a tolerance of one minute,
// taking n units at time now computes
//
//	new = max(TAT, now) + n·T
//
// and admits when new − now ≤ 1 minute, storing new as the TAT. So:
//
//   - remaining = ⌊(1 minute − (TAT − now)) / T⌋ units,
//   - reset     = TAT − now: the time until the bucket is full again (what
//     OpenAI's x-ratelimit-reset-* headers report),
//   - retry     = new − 1 minute − now: when this refused request would be
//     admitted (Retry-After).
//
// A limit whose TAT has passed holds no information (its bucket is full),
// so it can be forgotten at any time: that is how memory stays bounded.
// Token corrections (Adjust) move the TAT by the difference between the
// estimate taken at admission and the real usage, in either direction.
//
// Why GCRA and not a sliding window: one number per limit (a sliding-window
// log keeps every request of the last minute, and a TPM limit would keep
// every token batch), exact arithmetic instead of the two-window
// interpolation of a sliding-window counter, no burst of 2R at a window
// boundary as with fixed windows, a natural "reset" and "retry after"
// value, corrections in both directions with one addition, and a Redis
// script that reads and writes one key per limit. Its one difference from
// a sliding window: after a quiet minute the full R may be used at once and
// the bucket then refills at R per minute, so a 60-second window that
// straddles such a burst can see up to 2R−1 units; over any longer period
// the rate is exactly R per minute.
//
// Several limits apply to one request (key, project, route; requests and
// tokens). Take checks all of them and takes from all of them only when
// every one admits, atomically: a request refused by its project's limit
// does not use up its key's.
package ratelimit

import (
	"context"
	"math"
	"time"
)

// Scope says what a limit belongs to.
type Scope byte

// Scopes of limits.
const (
	ScopeKey     Scope = 'k'
	ScopeProject Scope = 'p'
	ScopeRoute   Scope = 'r'
)

// Unit is what a limit counts.
type Unit byte

// Units of limits.
const (
	Requests Unit = 'r'
	Tokens   Unit = 't'
)

// Limit is one limit a request counts against.
type Limit struct {
	Scope Scope
	ID    int64 // the key's, project's or route's id
	Unit  Unit
	// PerMinute is the configured limit (positive).
	PerMinute int64
	// Cost is the number of units the request takes (Take) or the
	// correction to apply (Adjust, negative to give back).
	Cost int64
}

// State is a limit's standing after a check, for the rate limit headers.
type State struct {
	Limit     int64
	Remaining int64
	// Reset is how long until the limit is back to its full allowance.
	Reset time.Duration
}

// Result is the verdict of Take.
type Result struct {
	Allowed bool
	// Denied is the index of the limit that refused (the one that admits
	// last), -1 when allowed.
	Denied int
	// RetryAfter is how long until the refused request would be admitted;
	// 0 with TooLarge.
	RetryAfter time.Duration
	// TooLarge: the request costs more than the refusing limit allows in a
	// whole minute, so waiting does not help.
	TooLarge bool
	// States holds one entry per limit, in order: after the take when
	// allowed, as they stand when refused.
	States []State
	// Shared is false when the verdict came from this replica's own
	// counters (no Redis configured, or Redis unavailable).
	Shared bool
}

// Limiter checks limits. Implementations must be safe for concurrent use.
type Limiter interface {
	// Take admits the request when every limit has room for its cost, and
	// then takes the cost from every limit, atomically; otherwise it takes
	// nothing. It never blocks on anything slower than a lock for long: a
	// shared limiter answers within its timeout.
	Take(ctx context.Context, limits []Limit) Result
	// Adjust moves each limit by its Cost (negative gives back), without
	// checking: the correction of an estimate once the real usage is
	// known. shared is the Result.Shared of the Take being corrected.
	Adjust(ctx context.Context, limits []Limit, shared bool)
}

// minute is the GCRA tolerance: a bucket holds one minute of its limit.
const minute = int64(time.Minute)

// increment is the TAT movement of cost units at perMinute per minute, in
// nanoseconds: cost·(60s/perMinute) without overflow or rounding drift.
// |cost| must not exceed perMinute.
func increment(cost, perMinute int64) int64 {
	// Whole minutes first, so a correction of many minutes' worth (a
	// debt, see clampCost) cannot overflow.
	whole, part := cost/perMinute, cost%perMinute
	return whole*minute + part*(minute/perMinute) + part*(minute%perMinute)/perMinute
}

// maxDebt is how many minutes' worth a correction may add: a request that
// used far more than it was admitted on (no max_tokens, a long answer)
// leaves its limit in debt, so the rate holds over time instead of the
// overrun being forgiven past one minute.
const maxDebt = 60

// clampCost bounds a correction: a refund to at most one minute's worth
// (an empty bucket means the same as more), a charge to maxDebt minutes'.
func clampCost(cost, perMinute int64) int64 {
	return max(-perMinute, min(cost, maxDebt*perMinute))
}

// stateOf is the standing of a limit whose TAT is ahead of now by ahead.
func stateOf(perMinute int64, ahead time.Duration) State {
	ahead = max(ahead, 0)
	free := float64(minute-int64(ahead)) / float64(minute)
	rem := int64(math.Floor(free*float64(perMinute) + 1e-9))
	return State{Limit: perMinute, Remaining: max(rem, 0), Reset: ahead}
}
