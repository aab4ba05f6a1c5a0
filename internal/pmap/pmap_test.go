package pmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestEditsLeaveOldMapsAlone applies random sets and deletes to a Map
// and a plain map alike, keeping every version: each version must still
// hold what its plain copy held, whatever was edited after it.
func TestEditsLeaveOldMapsAlone(t *testing.T) {
	//nolint:gosec // G404: a reproducible sequence
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct {
		m    Map[int, int]
		want map[int]int
	}
	var versions []version
	var cur Map[int, int]
	want := map[int]int{}
	for round := range 400 {
		e := cur.Edit()
		// Grow past smallMax and through splits to more shards, and
		// shrink back, over and over.
		span := 1 + (round%50)*(round%7+1)*8
		for range 1 + rng.IntN(20) {
			k := rng.IntN(span)
			if rng.IntN(3) == 0 {
				e.Delete(k)
				delete(want, k)
			} else {
				v := rng.Int()
				e.Set(k, v)
				want[k] = v
			}
			if got, ok := e.Get(k); got != want[k] || ok != hasKey(want, k) {
				t.Fatalf("round %d: editor reads %d=%d, want %v", round, k, got, want[k])
			}
		}
		if rng.IntN(2) == 0 { // sometimes take the map mid-edit and edit on
			versions = append(versions, version{e.Map(), maps.Clone(want)})
			k := rng.IntN(span)
			e.Set(k, -1)
			want[k] = -1
		}
		cur = e.Map()
		versions = append(versions, version{cur, maps.Clone(want)})
	}
	for i, v := range versions {
		check(t, i, v.m, v.want)
	}
}

func hasKey(m map[int]int, k int) bool { _, ok := m[k]; return ok }

func check(t *testing.T, i int, m Map[int, int], want map[int]int) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("version %d: Len %d, want %d", i, m.Len(), len(want))
	}
	got := map[int]int{}
	for k, v := range m.All() {
		if _, dup := got[k]; dup {
			t.Fatalf("version %d: key %d yielded twice", i, k)
		}
		got[k] = v
	}
	if !maps.Equal(got, want) {
		t.Fatalf("version %d: entries %v, want %v", i, got, want)
	}
	for k, v := range want {
		if g, ok := m.Get(k); !ok || g != v {
			t.Fatalf("version %d: Get(%d) = %d, %v; want %d", i, k, g, ok, v)
		}
	}
	if _, ok := m.Get(-5); ok {
		t.Fatalf("version %d: absent key found", i)
	}
}

func TestZeroAndOf(t *testing.T) {
	var m Map[string, *int]
	if m.Len() != 0 || m.At("x") != nil {
		t.Fatal("zero Map is not empty")
	}
	for range m.All() {
		t.Fatal("zero Map yields")
	}
	src := map[int]int{}
	for i := range 100 {
		src[i] = i * i
	}
	check(t, 0, Of(src), src)
}

func BenchmarkGet(b *testing.B) {
	type node struct{ x int }
	keys := make([]*node, 100_000)
	var e Editor[*node, int]
	plain := map[*node]int{}
	for i := range keys {
		keys[i] = &node{i}
		e.Set(keys[i], i)
		plain[keys[i]] = i
	}
	m := e.Map()
	b.Run("pmap", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = m.At(keys[i%len(keys)])
		}
	})
	b.Run("map", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = plain[keys[i%len(keys)]]
		}
	})
}

// BenchmarkSetOne is one entry written in a map of 100,000: the cost of a
// patch, against cloning a plain map.
func BenchmarkSetOne(b *testing.B) {
	var e Editor[int64, int]
	plain := map[int64]int{}
	for i := range int64(100_000) {
		e.Set(i, 1)
		plain[i] = 1
	}
	m := e.Map()
	b.Run("pmap", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			e := m.Edit()
			e.Set(int64(i%100_000), i)
			_ = e.Map()
		}
	})
	b.Run("clone", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			c := maps.Clone(plain)
			c[int64(i%100_000)] = i
		}
	})
}

// BenchmarkMemory reports the heap a Map of n int64 keys to pointers
// holds, per entry, against a plain map's (issue 21: a catalog holds
// many Maps of a few hundred entries).
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{50, 200, 1000, 10_000, 100_000} {
		b.Run(fmt.Sprint("entries=", n), func(b *testing.B) {
			v := new(int)
			var pm, plain float64
			for range b.N {
				pm = heldBy(func() any {
					var e Editor[int64, *int]
					for i := range int64(n) {
						e.Set(i, v)
					}
					return e.Map()
				})
				plain = heldBy(func() any {
					m := map[int64]*int{}
					for i := range int64(n) {
						m[i] = v
					}
					return m
				})
			}
			b.ReportMetric(pm/float64(n), "B/entry")
			b.ReportMetric(plain/float64(n), "map-B/entry")
		})
	}
}

// heldBy is the heap what build returns holds, after a collection.
func heldBy(build func() any) float64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	x := build()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(x)
	return float64(ms.HeapAlloc) - float64(before)
}
