// Package pmap is a persistent map: an immutable map whose edits return a
// new map sharing most of its memory with the old one.
//
// Snapshots and the gateway's tables are immutable and replaced whole on
// every change (issue 21): copying a plain map of 100,000 routes to change
// one costs milliseconds. A Map above a few dozen entries is split in
// shards by key hash; an edit copies only the shards it writes, so one
// change costs O(n/shards), and reads cost one hash more than a map's.
// The number of shards grows with the Map, up to 256, so that a Map of a
// hundred entries is not 256 maps of one or none (issue 21: each map costs
// a few hundred bytes of its own).
package pmap

import (
	"hash/maphash"
	"iter"
	"maps"
	"slices"
)

const (
	// maxShards is the most shards a Map has.
	maxShards = 256
	// smallMax is the most entries a Map keeps in one plain map, which an
	// edit copies whole: few maps are large, and shards cost memory.
	smallMax = 64
	// perShard is the mean number of entries per shard a split aims at,
	// below maxShards: an edit copies a shard, and each shard's map costs
	// its header and spare room. A Map is split again when its shards
	// hold twice as many.
	perShard = 32
)

var seed = maphash.MakeSeed()

// shardOf is k's shard among n, a power of two.
func shardOf[K comparable](k K, n int) int {
	return int(maphash.Comparable(seed, k) & uint64(n-1))
}

// Map is an immutable map from K to V. The zero Map is empty. Copying a
// Map copies a reference: both copies read the same entries.
type Map[K comparable, V any] struct {
	small map[K]V // the entries while shards is nil
	// shards are nil while the map is small; their count is a power of
	// two, at most maxShards.
	shards []map[K]V
	n      int
}

// Of returns a Map with the entries of m.
func Of[K comparable, V any](m map[K]V) Map[K, V] {
	var e Editor[K, V]
	for k, v := range m {
		e.Set(k, v)
	}
	return e.Map()
}

// Len is the number of entries.
func (m Map[K, V]) Len() int { return m.n }

// Get returns k's value and whether k is present.
func (m Map[K, V]) Get(k K) (V, bool) {
	if m.shards == nil {
		v, ok := m.small[k]
		return v, ok
	}
	v, ok := m.shards[shardOf(k, len(m.shards))][k]
	return v, ok
}

// At returns k's value, or V's zero value when k is absent.
func (m Map[K, V]) At(k K) V {
	v, _ := m.Get(k)
	return v
}

// All yields every entry, in no particular order.
func (m Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.shards == nil {
			for k, v := range m.small {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for _, sh := range m.shards {
			for k, v := range sh {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// Values yields every value, in no particular order.
func (m Map[K, V]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, v := range m.All() {
			if !yield(v) {
				return
			}
		}
	}
}

// Edit returns an Editor that starts from m. m itself never changes.
func (m Map[K, V]) Edit() *Editor[K, V] { return &Editor[K, V]{m: m} }

// Editor makes a new Map from an old one, copying what it writes on first
// write. The zero Editor starts from the empty Map. An Editor is not safe
// for concurrent use.
type Editor[K comparable, V any] struct {
	m Map[K, V]
	// ownSmall, ownShards and owned say which parts of m this Editor has
	// copied, so it may write them in place: the small map, the shard
	// array, and each shard (a bit per shard).
	ownSmall, ownShards bool
	owned               [maxShards / 64]uint64
}

// Len is the number of entries.
func (e *Editor[K, V]) Len() int { return e.m.n }

// Get returns k's value and whether k is present.
func (e *Editor[K, V]) Get(k K) (V, bool) { return e.m.Get(k) }

// At returns k's value, or V's zero value when k is absent.
func (e *Editor[K, V]) At(k K) V { return e.m.At(k) }

// Set sets k's value.
func (e *Editor[K, V]) Set(k K, v V) {
	if e.m.shards == nil {
		if !e.ownSmall {
			e.m.small = cloneMap(e.m.small)
			e.ownSmall = true
		}
		_, had := e.m.small[k]
		e.m.small[k] = v
		if !had {
			e.m.n++
		}
		if e.m.n > smallMax {
			e.split()
		}
		return
	}
	sh := e.shard(shardOf(k, len(e.m.shards)))
	if _, had := sh[k]; !had {
		e.m.n++
	}
	sh[k] = v
	if len(e.m.shards) < maxShards && e.m.n > 2*perShard*len(e.m.shards) {
		e.split()
	}
}

// Delete removes k.
func (e *Editor[K, V]) Delete(k K) {
	if _, ok := e.m.Get(k); !ok {
		return
	}
	e.m.n--
	if e.m.shards == nil {
		if !e.ownSmall {
			e.m.small = cloneMap(e.m.small)
			e.ownSmall = true
		}
		delete(e.m.small, k)
		return
	}
	delete(e.shard(shardOf(k, len(e.m.shards))), k)
}

// Map returns the Map edited so far. Later edits do not change it: the
// Editor copies again what it writes next.
func (e *Editor[K, V]) Map() Map[K, V] {
	e.ownSmall, e.ownShards, e.owned = false, false, [maxShards / 64]uint64{}
	return e.m
}

// shard returns shard i, copied for this Editor.
func (e *Editor[K, V]) shard(i int) map[K]V {
	if !e.ownShards {
		e.m.shards = slices.Clone(e.m.shards)
		e.ownShards = true
	}
	if bit := uint64(1) << (i % 64); e.owned[i/64]&bit == 0 || e.m.shards[i] == nil {
		e.m.shards[i] = cloneMap(e.m.shards[i])
		e.owned[i/64] |= bit
	}
	return e.m.shards[i]
}

// split moves the entries into new shards, perShard of them to a shard
// or as near as a power of two allows, at most maxShards.
func (e *Editor[K, V]) split() {
	n := 1
	for n < maxShards && n*perShard < e.m.n {
		n *= 2
	}
	shards := make([]map[K]V, n)
	for i := range shards {
		shards[i] = make(map[K]V, e.m.n/n)
	}
	for k, v := range e.m.All() {
		shards[shardOf(k, n)][k] = v
	}
	e.m.small, e.m.shards = nil, shards
	e.ownSmall, e.ownShards = false, true
	for i := range e.owned {
		e.owned[i] = ^uint64(0)
	}
}

// cloneMap copies m (maps.Clone copies a map's memory, far quicker than
// inserting its entries anew); a nil m becomes an empty map.
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return maps.Clone(m)
}
