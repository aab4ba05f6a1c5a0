package balancer_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/balancer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var strategies = []string{balancer.Weighted, balancer.RoundRobin, balancer.LeastBusy, balancer.Latency}

func mustNew(t testing.TB, strategy string) balancer.Selector {
	t.Helper()
	s, err := balancer.New(strategy)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counts picks n times and tallies the chosen indices; -1 lands in the last
// slot.
func counts(t *testing.T, s balancer.Selector, cands []balancer.Candidate, n int) []int {
	t.Helper()
	got := make([]int, len(cands)+1)
	for range n {
		i := s.Pick(cands)
		if i < 0 {
			got[len(cands)]++
			continue
		}
		got[i]++
	}
	return got
}

// stats returns Stats with the given requests in flight and, when ewma > 0,
// that latency average.
func stats(inFlight int, ewma time.Duration) *balancer.Stats {
	s := new(balancer.Stats)
	if ewma > 0 {
		s.Begin()
		s.End(ewma, true)
	}
	for range inFlight {
		s.Begin()
	}
	return s
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"weighted", true},
		{"round_robin", true},
		{"least_busy", true},
		{"latency", true},
		{"random", false},
		{"Weighted", false},
	} {
		s, err := balancer.New(tc.name)
		if (err == nil) != tc.ok || (s != nil) != tc.ok {
			t.Errorf("New(%q) = %v, %v; want ok=%v", tc.name, s, err, tc.ok)
		}
	}
}

func TestNoneUsable(t *testing.T) {
	for _, name := range strategies {
		s := mustNew(t, name)
		for _, cands := range [][]balancer.Candidate{
			nil,
			{},
			{{Weight: 1, Skip: true}, {Weight: 2, Skip: true}},
			{{Weight: 0}, {Weight: 0, Stats: stats(0, time.Millisecond)}},
			{{Weight: 0}, {Weight: 3, Skip: true}},
		} {
			if got := s.Pick(cands); got != -1 {
				t.Errorf("%s: Pick(%+v) = %d, want -1", name, cands, got)
			}
		}
	}
}

func TestOnlyOneUsable(t *testing.T) {
	for _, name := range strategies {
		s := mustNew(t, name)
		cands := []balancer.Candidate{{Weight: 1, Skip: true}, {Weight: 0}, {Weight: 2, Stats: stats(50, time.Hour)}, {Weight: 4, Skip: true}}
		for range 100 {
			if got := s.Pick(cands); got != 2 {
				t.Fatalf("%s: Pick = %d, want 2", name, got)
			}
		}
	}
}

// within checks that got/n is share±tol.
func within(t *testing.T, label string, got, n int, share, tol float64) {
	t.Helper()
	if f := float64(got) / float64(n); math.Abs(f-share) > tol {
		t.Errorf("%s: share %.3f, want %.3f±%.2f", label, f, share, tol)
	}
}

func TestWeighted(t *testing.T) {
	const n = 10000
	for _, tc := range []struct {
		name  string
		cands []balancer.Candidate
		want  []float64 // share per candidate
	}{
		{"3:1", []balancer.Candidate{{Weight: 3}, {Weight: 1}}, []float64{.75, .25}},
		{"skipped share goes by weight", []balancer.Candidate{{Weight: 2}, {Weight: 5, Skip: true}, {Weight: 1}}, []float64{2. / 3, 0, 1. / 3}},
		{"weight 0 is drained", []balancer.Candidate{{Weight: 0}, {Weight: 1}, {Weight: 1}}, []float64{0, .5, .5}},
		{"equal", []balancer.Candidate{{Weight: 7}, {Weight: 7}, {Weight: 7}, {Weight: 7}}, []float64{.25, .25, .25, .25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// n=10,000 gives a standard deviation under 0.5%, so ±3% is
			// about 6 sigma: not flaky although unseeded.
			got := counts(t, mustNew(t, balancer.Weighted), tc.cands, n)
			for i, share := range tc.want {
				if share == 0 && got[i] != 0 {
					t.Errorf("candidate %d picked %d times, want never", i, got[i])
				}
				within(t, fmt.Sprint("candidate ", i), got[i], n, share, .03)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cands []balancer.Candidate
		want  []int // exact sequence of picks
	}{
		{"cycles", []balancer.Candidate{{Weight: 1}, {Weight: 9}, {Weight: 1}}, []int{0, 1, 2, 0, 1, 2, 0}},
		{"skips", []balancer.Candidate{{Weight: 1}, {Weight: 1, Skip: true}, {Weight: 1}, {Weight: 0}, {Weight: 1}}, []int{0, 2, 4, 0, 2, 4}},
		{"single", []balancer.Candidate{{Weight: 1, Skip: true}, {Weight: 1}}, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, balancer.RoundRobin)
			for i, want := range tc.want {
				if got := s.Pick(tc.cands); got != want {
					t.Fatalf("pick %d = %d, want %d", i, got, want)
				}
			}
		})
	}
}

// TestRoundRobinEvenWithSkip: a skipped candidate's turns are shared, not
// handed to its neighbour.
func TestRoundRobinEvenWithSkip(t *testing.T) {
	cands := []balancer.Candidate{{Weight: 1}, {Weight: 1, Skip: true}, {Weight: 1}, {Weight: 1}}
	got := counts(t, mustNew(t, balancer.RoundRobin), cands, 3000)
	if got[0] != 1000 || got[1] != 0 || got[2] != 1000 || got[3] != 1000 {
		t.Fatalf("counts %v, want 1000 each for 0, 2, 3", got[:len(cands)])
	}
}

func TestLeastBusy(t *testing.T) {
	const n = 10000
	for _, tc := range []struct {
		name  string
		cands []balancer.Candidate
		want  []float64
	}{
		{"fewest in flight", []balancer.Candidate{
			{Weight: 1, Stats: stats(5, 0)}, {Weight: 1, Stats: stats(2, 0)}, {Weight: 1, Stats: stats(9, 0)},
		}, []float64{0, 1, 0}},
		{"skipped idle one ignored", []balancer.Candidate{
			{Weight: 1, Stats: stats(0, 0), Skip: true}, {Weight: 1, Stats: stats(3, 0)}, {Weight: 1, Stats: stats(4, 0)},
		}, []float64{0, 1, 0}},
		{"ties spread", []balancer.Candidate{
			{Weight: 1, Stats: stats(1, 0)}, {Weight: 1, Stats: stats(4, 0)}, {Weight: 1, Stats: stats(1, 0)},
		}, []float64{.5, 0, .5}},
		{"nil stats is idle", []balancer.Candidate{
			{Weight: 1, Stats: stats(1, 0)}, {Weight: 1}, {Weight: 1}, {Weight: 1, Stats: stats(0, 0)},
		}, []float64{0, 1. / 3, 1. / 3, 1. / 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := counts(t, mustNew(t, balancer.LeastBusy), tc.cands, n)
			for i, share := range tc.want {
				if share == 0 && got[i] != 0 {
					t.Errorf("candidate %d picked %d times, want never", i, got[i])
				}
				within(t, fmt.Sprint("candidate ", i), got[i], n, share, .03)
			}
		})
	}
}

func TestLatency(t *testing.T) {
	const n = 1000
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		cands []balancer.Candidate
		want  int     // the candidate that should dominate
		min   float64 // its minimum share
	}{
		{"lower EWMA wins", []balancer.Candidate{
			{Weight: 1, Stats: stats(0, 100*ms)}, {Weight: 1, Stats: stats(0, 10*ms)},
		}, 1, .99},
		{"lower EWMA wins among three", []balancer.Candidate{
			// Each pair is drawn 1/3 of the time; the fastest wins both of
			// its pairs, so about 2/3.
			{Weight: 1, Stats: stats(0, 100*ms)}, {Weight: 1, Stats: stats(0, 10*ms)}, {Weight: 1, Stats: stats(0, 50*ms)},
		}, 1, .55},
		{"unexplored wins", []balancer.Candidate{
			{Weight: 1, Stats: stats(0, 10*ms)}, {Weight: 1, Stats: stats(0, 0)},
		}, 1, .99},
		{"nil stats is unexplored", []balancer.Candidate{
			{Weight: 1, Stats: stats(0, ms)}, {Weight: 1},
		}, 1, .99},
		{"busy fast one loses to idle slower one", []balancer.Candidate{
			{Weight: 1, Stats: stats(20, 10*ms)}, {Weight: 1, Stats: stats(0, 100*ms)}, // 210ms vs 100ms
		}, 1, .99},
		{"unexplored one awaiting its first answer is not piled on", []balancer.Candidate{
			{Weight: 1, Stats: stats(3, 0)}, {Weight: 1, Stats: stats(1, 50*ms)},
		}, 1, .99},
		{"skipped fast one ignored", []balancer.Candidate{
			{Weight: 1, Stats: stats(0, ms), Skip: true}, {Weight: 1, Stats: stats(0, 100*ms)}, {Weight: 1, Stats: stats(0, 10*ms)},
		}, 2, .99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := counts(t, mustNew(t, balancer.Latency), tc.cands, n)
			if f := float64(got[tc.want]) / n; f < tc.min {
				t.Errorf("candidate %d share %.3f, want >= %.2f (counts %v)", tc.want, f, tc.min, got)
			}
		})
	}
}

// TestLatencyExploresEqualTargets: P2C between equal targets should spread.
func TestLatencyExploresEqualTargets(t *testing.T) {
	const n = 10000
	cands := []balancer.Candidate{{Weight: 1, Stats: stats(0, 10*time.Millisecond)}, {Weight: 1, Stats: stats(0, 10*time.Millisecond)}}
	got := counts(t, mustNew(t, balancer.Latency), cands, n)
	within(t, "candidate 0", got[0], n, .5, .03)
}

func TestStatsEWMA(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		ok      []bool
		want    time.Duration
	}{
		{"none", nil, nil, 0},
		{"first sample is taken as is", []time.Duration{40 * ms}, []bool{true}, 40 * ms},
		{"alpha 0.3", []time.Duration{100 * ms, 200 * ms}, []bool{true, true}, 130 * ms},
		{"failures do not count", []time.Duration{100 * ms, ms}, []bool{true, false}, 100 * ms},
		{"only failures: still unmeasured", []time.Duration{ms, ms}, []bool{false, false}, 0},
		{"zero latency still counts as a sample", []time.Duration{0}, []bool{true}, 1},
		{"alpha 0.3 again", []time.Duration{100 * ms, 200 * ms, 200 * ms}, []bool{true, true, true}, 151 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s balancer.Stats
			for i, d := range tc.samples {
				s.Begin()
				s.End(d, tc.ok[i])
			}
			if got := s.EWMA(); got != tc.want {
				t.Errorf("EWMA() = %v, want %v", got, tc.want)
			}
			if got := s.InFlight(); got != 0 {
				t.Errorf("InFlight() = %d, want 0", got)
			}
		})
	}
}

// TestStatsConcurrent: Begin/End from many goroutines balance out. Run it
// under -race.
func TestStatsConcurrent(t *testing.T) {
	var s balancer.Stats
	sel := mustNew(t, balancer.Latency)
	cands := []balancer.Candidate{{Weight: 1, Stats: &s}, {Weight: 1, Stats: new(balancer.Stats)}}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 1000 {
				s.Begin()
				_ = sel.Pick(cands) // readers race with writers
				s.End(time.Duration(g*1000+i)*time.Microsecond, i%3 != 0)
			}
		})
	}
	wg.Wait()
	if got := s.InFlight(); got != 0 {
		t.Fatalf("InFlight() = %d after balanced Begin/End, want 0", got)
	}
	if s.EWMA() <= 0 {
		t.Fatalf("EWMA() = %v, want a positive average", s.EWMA())
	}
}

// TestPickProperty: for random inputs, every strategy returns a usable index,
// or -1 exactly when none is usable. Inputs come from a fixed-seed PCG so a
// failure reproduces.
func TestPickProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(0x5eed, 0xba1a))
	sels := make([]balancer.Selector, len(strategies))
	for i, name := range strategies {
		sels[i] = mustNew(t, name)
	}
	pool := make([]*balancer.Stats, 8)
	for i := range pool {
		pool[i] = stats(r.IntN(4), time.Duration(r.IntN(3))*time.Millisecond)
	}
	for iter := range 20000 {
		cands := make([]balancer.Candidate, r.IntN(7))
		usable := 0
		for i := range cands {
			cands[i] = balancer.Candidate{Weight: r.IntN(4), Skip: r.IntN(3) == 0}
			if r.IntN(4) != 0 {
				cands[i].Stats = pool[r.IntN(len(pool))]
			}
			if !cands[i].Skip && cands[i].Weight > 0 {
				usable++
			}
		}
		before := append([]balancer.Candidate(nil), cands...)
		for si, s := range sels {
			got := s.Pick(cands)
			switch {
			case got == -1 && usable == 0:
			case got == -1:
				t.Fatalf("iter %d %s: Pick(%+v) = -1 with %d usable", iter, strategies[si], cands, usable)
			case got < 0 || got >= len(cands):
				t.Fatalf("iter %d %s: Pick(%+v) = %d, out of range", iter, strategies[si], cands, got)
			case cands[got].Skip || cands[got].Weight <= 0:
				t.Fatalf("iter %d %s: Pick(%+v) = %d, not usable", iter, strategies[si], cands, got)
			}
			for i := range cands {
				if cands[i] != before[i] {
					t.Fatalf("iter %d %s: Pick modified candidate %d", iter, strategies[si], i)
				}
			}
		}
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	cands := benchCands()
	for _, name := range strategies {
		s := mustNew(t, name)
		if a := testing.AllocsPerRun(1000, func() { s.Pick(cands) }); a != 0 {
			t.Errorf("%s: %v allocs per Pick, want 0", name, a)
		}
	}
}

func benchCands() []balancer.Candidate {
	ms := time.Millisecond
	return []balancer.Candidate{
		{Weight: 3, Stats: stats(2, 30*ms)},
		{Weight: 1, Stats: stats(0, 10*ms), Skip: true},
		{Weight: 2, Stats: stats(1, 20*ms)},
		{Weight: 1, Stats: stats(4, 50*ms)},
	}
}

func BenchmarkPick(b *testing.B) {
	cands := benchCands()
	for _, name := range strategies {
		s := mustNew(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.Pick(cands) < 0 {
					b.Fatal("no pick")
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if s.Pick(cands) < 0 {
						b.Fatal("no pick")
					}
				}
			})
		})
	}
}

func BenchmarkStatsBeginEnd(b *testing.B) {
	var s balancer.Stats
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Begin()
			s.End(10*time.Millisecond, true)
		}
	})
}
