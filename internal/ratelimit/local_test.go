package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func rpm(id, perMinute int64) Limit {
	return Limit{Scope: ScopeKey, ID: id, Unit: Requests, PerMinute: perMinute, Cost: 1}
}

func TestGCRARequestsPerMinute(t *testing.T) {
	clk := clock.NewManual(t0)
	l := NewLocal(clk, 0)
	ctx := context.Background()
	r := l.Take(ctx, []Limit{rpm(1, 1)})
	if !r.Allowed || r.States[0] != (State{Limit: 1, Remaining: 0, Reset: time.Minute}) {
		t.Fatalf("first = %+v", r)
	}
	r = l.Take(ctx, []Limit{rpm(1, 1)})
	if r.Allowed || r.Denied != 0 || r.RetryAfter != time.Minute || r.TooLarge {
		t.Fatalf("second = %+v", r)
	}
	clk.Advance(59 * time.Second)
	if r = l.Take(ctx, []Limit{rpm(1, 1)}); r.Allowed || r.RetryAfter != time.Second {
		t.Fatalf("after 59s = %+v", r)
	}
	clk.Advance(time.Second)
	if r = l.Take(ctx, []Limit{rpm(1, 1)}); !r.Allowed {
		t.Fatalf("after 60s = %+v", r)
	}

	// 60 per minute: a full minute at once, then one per second.
	for i := range 60 {
		if r = l.Take(ctx, []Limit{rpm(2, 60)}); !r.Allowed || r.States[0].Remaining != int64(59-i) {
			t.Fatalf("request %d = %+v", i, r)
		}
	}
	if r = l.Take(ctx, []Limit{rpm(2, 60)}); r.Allowed || r.RetryAfter != time.Second || r.States[0].Reset != time.Minute {
		t.Fatalf("61st = %+v", r)
	}
	clk.Advance(time.Second)
	if r = l.Take(ctx, []Limit{rpm(2, 60)}); !r.Allowed || r.States[0].Remaining != 0 {
		t.Fatalf("after 1s = %+v", r)
	}
}

// TestTakeIsAllOrNothing: a request refused by one limit takes nothing
// from the others, and the verdict names the limit that admits last.
func TestTakeIsAllOrNothing(t *testing.T) {
	clk := clock.NewManual(t0)
	l := NewLocal(clk, 0)
	ctx := context.Background()
	key := rpm(1, 10)
	project := Limit{Scope: ScopeProject, ID: 1, Unit: Requests, PerMinute: 1, Cost: 1}
	tokens := Limit{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 400}
	if r := l.Take(ctx, []Limit{key, project, tokens}); !r.Allowed {
		t.Fatalf("first = %+v", r)
	}
	r := l.Take(ctx, []Limit{key, project, tokens})
	if r.Allowed || r.Denied != 1 || r.RetryAfter != time.Minute {
		t.Fatalf("second = %+v", r)
	}
	if r.States[0].Remaining != 9 || r.States[2].Remaining != 600 {
		t.Fatalf("refused request took from other limits: %+v", r.States)
	}
	// The key alone still has 9.
	for i := range 9 {
		if r := l.Take(ctx, []Limit{key}); !r.Allowed {
			t.Fatalf("key request %d refused: %+v", i, r)
		}
	}
	big := tokens
	big.Cost = 1001
	if r := l.Take(ctx, []Limit{big}); r.Allowed || !r.TooLarge || r.RetryAfter != 0 {
		t.Fatalf("too large = %+v", r)
	}
}

func TestAdjustCorrectsTokens(t *testing.T) {
	clk := clock.NewManual(t0)
	l := NewLocal(clk, 0)
	ctx := context.Background()
	tok := Limit{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 900}
	if r := l.Take(ctx, []Limit{tok}); !r.Allowed || r.States[0].Remaining != 100 {
		t.Fatalf("take = %+v", r)
	}
	// The response used 100: give back 800.
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: -800}}, false)
	tok.Cost = 900
	if r := l.Take(ctx, []Limit{tok}); !r.Allowed || r.States[0].Remaining != 0 {
		t.Fatalf("after refund = %+v", r)
	}
	// It used 1,500 in the end: the debt shows in the next check.
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 600}}, false)
	tok.Cost = 1
	if r := l.Take(ctx, []Limit{tok}); r.Allowed || r.RetryAfter != 36*time.Second+60*time.Millisecond {
		t.Fatalf("after overuse = %+v", r)
	}
	// A correction moves at most one minute's worth; a refund never leaves
	// more than a full bucket, which is forgotten.
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: -5000}}, false)
	if r := l.Take(ctx, []Limit{tok}); !r.Allowed || r.States[0].Reset != 36*time.Second+60*time.Millisecond {
		t.Fatalf("after a clamped refund = %+v", r)
	}
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: -5000}}, false)
	if l.Tracked() != 0 {
		t.Fatalf("a full bucket is still tracked: %d", l.Tracked())
	}
}

// TestMemoryIsBounded: full buckets are forgotten, and past the bound a
// tracked limit makes room.
func TestMemoryIsBounded(t *testing.T) {
	clk := clock.NewManual(t0)
	l := NewLocal(clk, shards*4)
	ctx := context.Background()
	for id := range int64(10000) {
		l.Take(ctx, []Limit{rpm(id, 1000)})
	}
	if n := l.Tracked(); n > shards*4 {
		t.Fatalf("tracked %d limits, bound %d", n, shards*4)
	}
	if l.Evicted() == 0 {
		t.Fatal("nothing evicted past the bound")
	}
	clk.Advance(2 * time.Minute)
	l.Take(ctx, []Limit{rpm(-1, 1)})
	for id := range int64(shards * 8) { // every shard sees a new limit and sweeps
		l.Take(ctx, []Limit{rpm(100000+id, 1)})
	}
	if n := l.Tracked(); n > shards*4 {
		t.Fatalf("after sweeps: tracked %d", n)
	}
}

// TestConcurrentTakesAdmitExactly: at one instant, however many goroutines
// race, exactly the limit is admitted, on every limit of the request.
func TestConcurrentTakesAdmitExactly(t *testing.T) {
	for range 20 {
		clk := clock.NewManual(t0)
		l := NewLocal(clk, 0)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					lims := []Limit{rpm(1, 100), {Scope: ScopeProject, ID: 7, Unit: Requests, PerMinute: 1000, Cost: 1},
						{Scope: ScopeRoute, ID: int64(g % 2), Unit: Tokens, PerMinute: 1 << 30, Cost: 3}}
					if l.Take(context.Background(), lims).Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if admitted.Load() != 100 {
			t.Fatalf("admitted %d, want 100", admitted.Load())
		}
		r := l.Take(context.Background(), []Limit{{Scope: ScopeProject, ID: 7, Unit: Requests, PerMinute: 1000, Cost: 1}})
		if r.States[0].Remaining != 899 {
			t.Fatalf("project remaining %d, want 899: refused requests took from it", r.States[0].Remaining)
		}
	}
}

func TestIncrementIsExact(t *testing.T) {
	for _, c := range []struct{ cost, per, want int64 }{
		{1, 1, int64(time.Minute)}, {1, 60, int64(time.Second)}, {7, 7, int64(time.Minute)},
		{1_000_000_000, 1_000_000_000, int64(time.Minute)}, {-3, 3, -int64(time.Minute)}, {1, 1_000_000_000, 60},
	} {
		if got := increment(c.cost, c.per); got != c.want {
			t.Errorf("increment(%d, %d) = %d, want %d", c.cost, c.per, got, c.want)
		}
	}
}

// TestOveruseIsADebt: a request admitted on a small estimate that used
// far more leaves its limit in debt for as many minutes' worth (up to
// maxDebt), so a key cannot outrun its tokens per minute with requests
// that set no max_tokens.
func TestOveruseIsADebt(t *testing.T) {
	clk := clock.NewManual(t0)
	l := NewLocal(clk, 0)
	ctx := context.Background()
	tok := Limit{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 5}
	if r := l.Take(ctx, []Limit{tok}); !r.Allowed {
		t.Fatalf("take = %+v", r)
	}
	// It used 8,000 tokens, eight minutes' worth.
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 8000 - 5}}, false)
	r := l.Take(ctx, []Limit{tok})
	if r.Allowed || r.RetryAfter < 7*time.Minute {
		t.Fatalf("after an 8-minute overrun = %+v; want refused for about 7 minutes", r)
	}
	clk.Advance(r.RetryAfter)
	if r := l.Take(ctx, []Limit{tok}); !r.Allowed {
		t.Fatalf("once the debt is paid = %+v", r)
	}
	// The debt is bounded: a huge overrun blocks for maxDebt minutes, not
	// forever.
	l.Adjust(ctx, []Limit{{Scope: ScopeKey, ID: 1, Unit: Tokens, PerMinute: 1000, Cost: 1 << 40}}, false)
	if r := l.Take(ctx, []Limit{tok}); r.Allowed || r.RetryAfter > maxDebt*time.Minute+time.Minute {
		t.Fatalf("after a huge overrun = %+v", r)
	}
	// No overflow at the largest limit.
	big := Limit{Scope: ScopeKey, ID: 2, Unit: Tokens, PerMinute: 1_000_000_000, Cost: 1}
	l.Take(ctx, []Limit{big})
	big.Cost = 59_000_000_000
	l.Adjust(ctx, []Limit{big}, false)
	big.Cost = 1
	if r := l.Take(ctx, []Limit{big}); r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > maxDebt*time.Minute {
		t.Fatalf("at the largest limit = %+v", r)
	}
}
