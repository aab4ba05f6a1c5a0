// Package clock is the time source of everything that waits or expires:
// breakers, health probes, rate limits, deployment state. Production code
// takes a Clock and gets System; tests pass a Manual and move it, so no test
// sleeps to let time pass.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is the time source; tests use a Manual.
//
// Now must be safe for concurrent use and should not go backwards (a clock
// that does only delays what waits on it).
type Clock interface{ Now() time.Time }

// System uses time.Now.
var System Clock = system{}

type system struct{}

func (system) Now() time.Time { return time.Now() }

// Manual is a Clock for tests: Now returns the set time and Advance moves
// it. Safe for concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// NewManual returns a Manual that reads t.
func NewManual(t time.Time) *Manual { return &Manual{t: t} }

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Now returns the clock's current time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Wait blocks until c delivers or ctx ends and reports whether c delivered,
// so `for clock.Wait(ctx, t.C) { ... }` runs once a tick until ctx ends.
func Wait(ctx context.Context, c <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c:
		return true
	}
}
