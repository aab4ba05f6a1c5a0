package balancer_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/balancer"
)

// skipSet excludes the IDs it holds.
type skipSet map[int]bool

func (s skipSet) Skip(id int) bool { return s[id] }

// members are n members with IDs 10, 11, ... and weight 1, idle.
func members(n int) []balancer.Member {
	ms := make([]balancer.Member, n)
	for i := range ms {
		ms[i] = balancer.Member{ID: 10 + i, Weight: 1, Stats: new(balancer.Stats)}
	}
	return ms
}

func TestSetEmptyAndDrained(t *testing.T) {
	for _, st := range strategies {
		var rr atomic.Uint64
		if got := balancer.NewSet(st, nil).Pick(&rr, nil); got != -1 {
			t.Errorf("%s: empty set picked %d", st, got)
		}
		s := balancer.NewSet(st, []balancer.Member{{ID: 1, Weight: 0}, {ID: 2, Weight: 1}})
		if s.Len() != 1 {
			t.Errorf("%s: a drained member is in the set", st)
		}
		for range 50 {
			if got := s.Pick(&rr, nil); got != 2 {
				t.Fatalf("%s: picked %d, want the one undrained member", st, got)
			}
		}
		if got := s.Pick(&rr, skipSet{2: true}); got != -1 {
			t.Errorf("%s: every member skipped, picked %d", st, got)
		}
	}
}

// Every strategy returns only members that are not skipped, and finds the
// last one left in a large set (the scan after too many redraws).
func TestSetSkipsExactly(t *testing.T) {
	for _, st := range strategies {
		for _, n := range []int{2, 3, 7, 1000} {
			s := balancer.NewSet(st, members(n))
			var rr atomic.Uint64
			skip := skipSet{}
			for i := range n {
				skip[10+i] = true
			}
			keep := 10 + n/2
			delete(skip, keep)
			for range 200 {
				if got := s.Pick(&rr, skip); got != keep {
					t.Fatalf("%s n=%d: picked %d, want %d, the one not skipped", st, n, got, keep)
				}
			}
			delete(skip, 10) // two left: both are chosen
			seen := map[int]int{}
			for range 400 {
				got := s.Pick(&rr, skip)
				if skip[got] || got < 10 || got >= 10+n {
					t.Fatalf("%s n=%d: picked %d", st, n, got)
				}
				seen[got]++
			}
			if st != balancer.LeastBusy && st != balancer.Latency && len(seen) != 2 {
				t.Errorf("%s n=%d: two members left, picks %v", st, n, seen)
			}
		}
	}
}

func TestSetWeighted(t *testing.T) {
	s := balancer.NewSet(balancer.Weighted, []balancer.Member{{ID: 0, Weight: 3}, {ID: 1, Weight: 1}, {ID: 2, Weight: 4}})
	var rr atomic.Uint64
	const n = 40000
	got := make([]int, 3)
	for range n {
		got[s.Pick(&rr, nil)]++
	}
	within(t, "weight 3", got[0], n, 3.0/8, 0.02)
	within(t, "weight 1", got[1], n, 1.0/8, 0.02)
	within(t, "weight 4", got[2], n, 4.0/8, 0.02)
	// A skipped member's share spreads over the rest by their weights.
	got = make([]int, 3)
	for range n {
		got[s.Pick(&rr, skipSet{2: true})]++
	}
	within(t, "weight 3 of 4", got[0], n, 3.0/4, 0.02)
	if got[2] != 0 {
		t.Errorf("a skipped member was picked %d times", got[2])
	}
}

func TestSetRoundRobin(t *testing.T) {
	s := balancer.NewSet(balancer.RoundRobin, members(4))
	var rr atomic.Uint64
	for i := range 12 {
		if got := s.Pick(&rr, nil); got != 10+i%4 {
			t.Fatalf("pick %d: %d, want %d", i, got, 10+i%4)
		}
	}
	// The position survives a rebuild of the set: it lives in rr.
	s = balancer.NewSet(balancer.RoundRobin, members(4))
	if got := s.Pick(&rr, nil); got != 10 {
		t.Fatalf("after a rebuild: %d, want 10", got)
	}
	// Position 13 is member 11's turn; skipped, the position indexes the
	// three members left (13 % 3 = 1: the second of 10, 12, 13).
	if got := s.Pick(&rr, skipSet{11: true}); got != 12 {
		t.Fatalf("a skipped member's turn: %d, want 12", got)
	}
	if got := s.Pick(&rr, skipSet{10: true, 11: true, 12: true, 13: true}); got != -1 {
		t.Fatalf("every member skipped: picked %d, want -1", got)
	}
}

// A member skipped on every request has its turns spread evenly over the
// others, as Selector's round robin does, not handed to its neighbour
// (which would get twice the traffic of the rest).
func TestSetRoundRobinSkipSpreadsEvenly(t *testing.T) {
	const picks = 4000
	s := balancer.NewSet(balancer.RoundRobin, members(4))
	sel, err := balancer.New(balancer.RoundRobin)
	if err != nil {
		t.Fatal(err)
	}
	var rr atomic.Uint64
	var got, old [4]int
	cands := make([]balancer.Candidate, 4)
	for i := range cands {
		cands[i] = balancer.Candidate{Weight: 1, Skip: i == 1}
	}
	for range picks {
		id := s.Pick(&rr, skipSet{11: true})
		if id < 10 || id > 13 {
			t.Fatalf("picked %d", id)
		}
		got[id-10]++
		old[sel.Pick(cands)]++
	}
	if got[1] != 0 || old[1] != 0 {
		t.Fatalf("the skipped member was picked: set %v, selector %v", got, old)
	}
	for _, k := range []int{0, 2, 3} {
		// picks/3 each, give or take the one left over.
		if got[k] < picks/3 || got[k] > picks/3+1 {
			t.Errorf("set: %v, want about %d for each member but 11", got, picks/3)
			break
		}
		if d := got[k] - old[k]; d < -1 || d > 1 {
			t.Errorf("set %v differs from the selector's %v", got, old)
			break
		}
	}
}

func TestSetLeastBusy(t *testing.T) {
	for _, n := range []int{3, 50} {
		ms := members(n)
		for i := range ms {
			ms[i].Stats = stats(5, 0)
		}
		ms[1].Stats = stats(0, 0)
		s := balancer.NewSet(balancer.LeastBusy, ms)
		var rr atomic.Uint64
		hits := 0
		const picks = 5000
		for range picks {
			if s.Pick(&rr, nil) == 11 {
				hits++
			}
		}
		// Exact below exactBelow; above, two choices pick the idle member
		// whenever it is drawn (about 2/n of the picks), never less.
		want := picks * 2 / n * 8 / 10
		if n < 5 {
			want = picks
		}
		if hits < want {
			t.Errorf("n=%d: the idle member won %d of %d picks, want at least %d", n, hits, picks, want)
		}
	}
}

func TestSetLatency(t *testing.T) {
	ms := members(2)
	ms[0].Stats = stats(0, 100*time.Millisecond)
	ms[1].Stats = stats(0, 10*time.Millisecond)
	s := balancer.NewSet(balancer.Latency, ms)
	var rr atomic.Uint64
	for range 100 {
		if got := s.Pick(&rr, nil); got != 11 {
			t.Fatalf("picked %d, want the faster member", got)
		}
	}
}

func TestSetPickDoesNotAllocate(t *testing.T) {
	for _, st := range strategies {
		s := balancer.NewSet(st, members(1000))
		var rr atomic.Uint64
		skip := skipSet{10: true, 500: true}
		if a := testing.AllocsPerRun(1000, func() { s.Pick(&rr, skip) }); a != 0 {
			t.Errorf("%s: %v allocations per pick", st, a)
		}
	}
}

// BenchmarkSetPick shows a pick's cost independent of the set's size.
func BenchmarkSetPick(b *testing.B) {
	for _, st := range strategies {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/%d", st, n), func(b *testing.B) {
				s := balancer.NewSet(st, members(n))
				var rr atomic.Uint64
				skip := skipSet{}
				b.ReportAllocs()
				for b.Loop() {
					s.Pick(&rr, skip)
				}
			})
		}
	}
}
