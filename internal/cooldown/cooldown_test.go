package cooldown_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/cooldown"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A step acts on, or checks, a breaker driven by a clock.Manual that starts
// at t0. Cases read as scripts of the state machine.
type step struct {
	name string
	run  func(b *cooldown.Breaker, c *clock.Manual) error
}

func do(name string, f func(*cooldown.Breaker)) step {
	return step{name, func(b *cooldown.Breaker, _ *clock.Manual) error { f(b); return nil }}
}

func fail() step    { return do("Failure", (*cooldown.Breaker).Failure) }
func succeed() step { return do("Success", (*cooldown.Breaker).Success) }
func abandon() step { return do("Abandon", (*cooldown.Breaker).Abandon) }
func trip() step    { return do("Trip", (*cooldown.Breaker).Trip) }

func limited(d time.Duration) step {
	return do("RateLimited("+d.String()+")", func(b *cooldown.Breaker) { b.RateLimited(d) })
}

func wait(d time.Duration) step {
	return step{"wait " + d.String(), func(_ *cooldown.Breaker, c *clock.Manual) error { c.Advance(d); return nil }}
}

func allow(ok, probe bool) step {
	return step{"Allow", func(b *cooldown.Breaker, _ *clock.Manual) error {
		if gotOK, gotProbe := b.Allow(); gotOK != ok || gotProbe != probe {
			return fmt.Errorf("got %v, %v; want %v, %v", gotOK, gotProbe, ok, probe)
		}
		return nil
	}}
}

// expect checks State and Until; until is relative to t0 and ignored when
// closed (Until must then be the zero time).
func expect(state string, until time.Duration) step {
	return step{"expect " + state, func(b *cooldown.Breaker, _ *clock.Manual) error {
		if got := b.State(); got != state {
			return fmt.Errorf("State() = %q", got)
		}
		got := b.Until()
		if state == cooldown.StateClosed {
			if !got.IsZero() {
				return fmt.Errorf("Until() = %v, want zero time", got)
			}
			return nil
		}
		if want := t0.Add(until); !got.Equal(want) {
			return fmt.Errorf("Until() = t0+%v, want t0+%v", got.Sub(t0), until)
		}
		return nil
	}}
}

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func script(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		default:
			panic("script: not a step")
		}
	}
	return out
}

const (
	closed   = cooldown.StateClosed
	cooling  = cooldown.StateCooling
	halfOpen = cooldown.StateHalfOpen
	sec      = time.Second
)

func TestBreaker(t *testing.T) {
	defaults := cooldown.Config{}
	for _, tc := range []struct {
		name  string
		cfg   cooldown.Config
		steps []step
	}{
		{"healthy", defaults, script(
			expect(closed, 0), allow(true, false), succeed(), allow(true, false), abandon(), expect(closed, 0),
		)},
		{"threshold", defaults, script(
			fail(), expect(closed, 0), fail(), expect(closed, 0), allow(true, false),
			fail(), expect(cooling, 5*sec), allow(false, false),
		)},
		{"success resets the failure count", defaults, script(
			fail(), fail(), succeed(), fail(), fail(), expect(closed, 0),
			fail(), expect(cooling, 5*sec),
		)},
		{"threshold one", cooldown.Config{Threshold: 1}, script(
			fail(), expect(cooling, 5*sec),
		)},
		{"exponential growth capped at Max, reset by Success", cooldown.Config{Base: 5 * sec, Max: 30 * sec}, script(
			repeat(3, fail()), expect(cooling, 5*sec),
			wait(5*sec), expect(halfOpen, 5*sec), allow(true, true), fail(), expect(cooling, 15*sec),
			wait(10*sec), allow(true, true), fail(), expect(cooling, 35*sec),
			wait(20*sec), allow(true, true), fail(), expect(cooling, 65*sec), // 40s capped to 30s
			wait(30*sec), allow(true, true), fail(), expect(cooling, 95*sec),
			wait(30*sec), allow(true, true), succeed(), expect(closed, 0),
			repeat(3, fail()), expect(cooling, 100*sec), // level back to Base
		)},
		{"cooling ends exactly at Until", defaults, script(
			repeat(3, fail()), wait(5*sec-1), allow(false, false), expect(cooling, 5*sec),
			wait(1), expect(halfOpen, 5*sec),
		)},
		{"429 honours and extends, never shortens", defaults, script(
			limited(3*sec), expect(cooling, 3*sec), allow(false, false),
			limited(1*sec), expect(cooling, 3*sec),
			limited(10*sec), expect(cooling, 10*sec),
			wait(2*sec), limited(9*sec), expect(cooling, 11*sec),
			wait(9*sec), expect(halfOpen, 11*sec),
		)},
		{"429 without Retry-After cools for Base", defaults, script(
			limited(0), expect(cooling, 5*sec),
		)},
		{"429 Retry-After is not capped at Max", cooldown.Config{Max: time.Minute}, script(
			limited(10*time.Minute), expect(cooling, 10*time.Minute),
		)},
		{"failures do not shorten a 429 cooldown", defaults, script(
			fail(), fail(), limited(60*sec), fail(), expect(cooling, 60*sec),
			repeat(5, fail()), expect(cooling, 60*sec),
		)},
		{"429 does not raise the level", defaults, script(
			limited(sec), wait(sec), allow(true, true), limited(sec), expect(cooling, 2*sec),
			wait(sec), allow(true, true), fail(), expect(cooling, 7*sec), // Base: level still 0
		)},
		{"probe success closes", defaults, script(
			repeat(3, fail()), wait(5*sec), allow(true, true), expect(halfOpen, 5*sec),
			allow(false, false), allow(false, false),
			succeed(), expect(closed, 0), allow(true, false),
		)},
		{"probe failure cools at the next level", defaults, script(
			repeat(3, fail()), wait(5*sec), allow(true, true), fail(), expect(cooling, 15*sec), allow(false, false),
		)},
		{"probe 429 releases the probe", defaults, script(
			repeat(3, fail()), wait(5*sec), allow(true, true), limited(2*sec), expect(cooling, 7*sec),
			wait(2*sec), allow(true, true),
		)},
		{"abandon hands the probe on", defaults, script(
			repeat(3, fail()), wait(5*sec), allow(true, true), allow(false, false),
			abandon(), expect(halfOpen, 5*sec), allow(true, true), allow(false, false),
			succeed(), expect(closed, 0),
		)},
		{"abandon without a probe is a no-op", defaults, script(
			repeat(3, fail()), abandon(), expect(cooling, 5*sec), allow(false, false),
			wait(5*sec), abandon(), allow(true, true), allow(false, false),
		)},
		{"one trip cools a closed breaker at once", defaults, script(
			trip(), expect(cooling, 5*sec), allow(false, false),
			wait(5*sec), allow(true, true), trip(), expect(cooling, 15*sec), // a tripped probe: the next level
			wait(10*sec), allow(true, true), succeed(), expect(closed, 0),
			trip(), expect(cooling, 20*sec), // the level was reset
		)},
		{"a trip after failures cools from the first", defaults, script(
			fail(), fail(), trip(), expect(cooling, 5*sec), fail(), expect(cooling, 5*sec),
		)},
		{"stale trips are ignored", defaults, script(
			trip(), repeat(4, trip()), expect(cooling, 5*sec),
			wait(5*sec), trip(), expect(halfOpen, 5*sec), // elapsed, no probe out: stale
			limited(time.Minute), trip(), expect(cooling, 65*sec), // a 429 cooldown is not cut
		)},
		{"stale verdicts while cooling are ignored", defaults, script(
			repeat(3, fail()), succeed(), expect(cooling, 5*sec),
			repeat(6, fail()), expect(cooling, 5*sec), // no climb up the ladder
			wait(5*sec), fail(), succeed(), expect(halfOpen, 5*sec), // elapsed, no probe out: still stale
			allow(true, true), fail(), expect(cooling, 15*sec), // level 1, not more
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clock.NewManual(t0)
			b := cooldown.New(tc.cfg, c)
			for i, s := range tc.steps {
				if err := s.run(b, c); err != nil {
					t.Errorf("step %d, %s: %v", i, s.name, err)
				}
			}
		})
	}
}

func TestSystemClock(t *testing.T) {
	b := cooldown.New(cooldown.Config{Threshold: 1, Base: time.Hour}, nil)
	before := time.Now()
	b.Failure()
	if u := b.Until(); u.Before(before.Add(time.Hour)) || u.After(time.Now().Add(time.Hour)) {
		t.Fatalf("Until() = %v, want about an hour from %v", u, before)
	}
	if ok, _ := b.Allow(); ok {
		t.Fatal("Allow() admitted a request while cooling")
	}
}

// TestSingleProbe: many callers race for an elapsed cooldown; exactly one
// becomes the probe and nobody else is admitted.
func TestSingleProbe(t *testing.T) {
	c := clock.NewManual(t0)
	b := cooldown.New(cooldown.Config{}, c)
	for range 3 {
		b.Failure()
	}
	c.Advance(5 * time.Second)

	var admitted, probes atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 100 {
		wg.Go(func() {
			<-start
			ok, probe := b.Allow()
			if ok {
				admitted.Add(1)
			}
			if probe {
				probes.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 1 || probes.Load() != 1 {
		t.Fatalf("admitted %d, probes %d; want exactly 1 each", admitted.Load(), probes.Load())
	}
}

// TestConcurrentInvariant drives the breaker from many goroutines with random
// verdicts while the clock moves, and checks that no two probes are ever out
// at once. Run it under -race.
//
// The breaker takes the first verdict reported while a probe is out as the
// probe's, whoever reports it (see the package doc). So a caller that was
// admitted while the breaker was closed may end the probe between the
// holder's Allow and the holder's count, and the next probe is then
// legitimately out beside a count not yet taken. Verdicts therefore wait
// (a write lock) while any caller is between Allow and its count (read
// locks, which do not exclude each other: two probes handed out at once
// would still be seen).
func TestConcurrentInvariant(t *testing.T) {
	c := clock.NewManual(t0)
	b := cooldown.New(cooldown.Config{Threshold: 2, Base: time.Millisecond, Max: 8 * time.Millisecond}, c)
	var out atomic.Int64 // probes currently held
	var window sync.RWMutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				c.Advance(time.Duration(r.IntN(200)) * time.Microsecond)
				window.RLock()
				ok, probe := b.Allow()
				if probe {
					if n := out.Add(1); n != 1 {
						t.Errorf("%d probes out at once", n)
					}
					// Release our count before reporting: once we report,
					// another probe may legitimately be handed out.
					out.Add(-1)
				}
				window.RUnlock()
				if !ok {
					_ = b.State()
					_ = b.Until()
					continue
				}
				window.Lock()
				switch v := r.IntN(10); {
				case v < 4:
					b.Success()
				case v < 8:
					b.Failure()
				case v < 9:
					b.RateLimited(time.Duration(r.IntN(3)) * time.Millisecond)
				case probe:
					b.Abandon()
				}
				window.Unlock()
			}
		})
	}
	wg.Wait()
}

func BenchmarkAllowClosed(b *testing.B) {
	br := cooldown.New(cooldown.Config{}, clock.System)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _ := br.Allow(); !ok {
				b.Fatal("closed breaker refused")
			}
		}
	})
}

func BenchmarkSuccessClosed(b *testing.B) {
	br := cooldown.New(cooldown.Config{}, clock.System)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.Success()
		}
	})
}

func BenchmarkAllowCooling(b *testing.B) {
	br := cooldown.New(cooldown.Config{Threshold: 1, Base: time.Hour}, clock.System)
	br.Failure()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _ := br.Allow(); ok {
				b.Fatal("cooling breaker admitted")
			}
		}
	})
}
