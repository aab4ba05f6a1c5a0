package policy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLimiterBurst: 100 requests arrive at once at a limit of 10 and hold
// their slot until all have tried: exactly 10 are admitted, 90 refused.
func TestLimiterBurst(t *testing.T) {
	l := NewLimiter(10)
	var (
		start    = make(chan struct{})
		tried    sync.WaitGroup
		done     sync.WaitGroup
		admitted atomic.Int64
		refused  atomic.Int64
		hold     = make(chan struct{})
	)
	tried.Add(100)
	done.Add(100)
	for range 100 {
		go func() {
			defer done.Done()
			<-start
			ok := l.Acquire()
			tried.Done()
			if !ok {
				refused.Add(1)
				return
			}
			admitted.Add(1)
			<-hold
			l.Release()
		}()
	}
	close(start)
	tried.Wait()
	if got := l.InFlight(); got != 10 {
		t.Errorf("InFlight = %d with all holding, want 10", got)
	}
	close(hold)
	done.Wait()
	if admitted.Load() != 10 || refused.Load() != 90 {
		t.Errorf("admitted %d, refused %d; want 10 and 90", admitted.Load(), refused.Load())
	}
	if got := l.InFlight(); got != 0 {
		t.Errorf("InFlight = %d after all released", got)
	}
}

// TestLimiterStress: 100 goroutines acquire and release in a loop; the
// number actually inside never exceeds the limit.
func TestLimiterStress(t *testing.T) {
	const max, workers, rounds = 10, 100, 200
	l := NewLimiter(max)
	var inside, peak, refused, admitted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !l.Acquire() {
					refused.Add(1)
					runtime.Gosched()
					continue
				}
				admitted.Add(1)
				n := inside.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if n > max {
					t.Errorf("%d inside a limit of %d", n, max)
				}
				runtime.Gosched()
				inside.Add(-1)
				l.Release()
			}
		}()
	}
	wg.Wait()
	t.Logf("admitted %d, refused %d, peak %d", admitted.Load(), refused.Load(), peak.Load())
	if admitted.Load()+refused.Load() != workers*rounds {
		t.Errorf("lost attempts")
	}
	if peak.Load() > max || l.InFlight() != 0 {
		t.Errorf("peak %d, in flight %d", peak.Load(), l.InFlight())
	}
}

func TestLimiterUnlimited(t *testing.T) {
	for _, l := range []*Limiter{NewLimiter(0), NewLimiter(-3), new(Limiter)} {
		for range 1000 {
			if !l.Acquire() {
				t.Fatal("unlimited limiter refused")
			}
		}
		if l.InFlight() != 1000 {
			t.Errorf("InFlight = %d", l.InFlight())
		}
		for range 1000 {
			l.Release()
		}
	}
	var nilL *Limiter
	if !nilL.Acquire() || nilL.InFlight() != 0 {
		t.Error("nil limiter")
	}
	nilL.Release()
	nilL.SetMax(3)
}

func TestLimiterSetMax(t *testing.T) {
	l := NewLimiter(2)
	if !l.Acquire() || !l.Acquire() || l.Acquire() {
		t.Fatal("limit 2")
	}
	l.SetMax(3)
	if !l.Acquire() || l.Acquire() {
		t.Fatal("raised to 3")
	}
	l.SetMax(1)
	if l.Acquire() || l.InFlight() != 3 {
		t.Fatal("lowered to 1 with 3 in flight")
	}
	l.Release()
	l.Release()
	if l.Acquire() {
		t.Fatal("1 in flight at limit 1")
	}
	l.Release()
	if !l.Acquire() {
		t.Fatal("0 in flight at limit 1")
	}
}

func TestLimiterReleaseWithoutAcquire(t *testing.T) {
	l := NewLimiter(1)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
		if l.InFlight() != 0 {
			t.Errorf("InFlight = %d after the bad Release", l.InFlight())
		}
	}()
	l.Release()
}
