package fleet

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// The directory: what the box-facing endpoints answer from.
//
// Every box asks for its configuration every few seconds, and the answer
// changes only when an operator or the controller writes a host. So the
// endpoints answer from memory: the live hosts indexed by (org, address),
// each address's /vllm/config body encoded once, and the fleet keys seen.
// A write invalidates the directory (Invalidate: the server calls it on
// every snapshot swap, which follows registrations, drains and other
// replicas' announcements, and after admin writes to hosts and fleet
// keys); the next request reloads it, once, however many wait. A directory
// older than MaxAge is reloaded too, which bounds what a missed
// announcement can leave stale. A failed reload keeps the previous
// directory serving: a box gets the assignment it already has, not an
// error, while the store is down.

// DirectoryStore is what the directory reads when it (re)loads, never per
// request.
type DirectoryStore interface {
	ListLiveHosts(ctx context.Context) ([]store.Host, error)
	FleetKeyByLookup(ctx context.Context, lookup string) (*store.FleetKey, error)
}

// DefaultDirectoryMaxAge bounds how long a directory serves without a
// reload when no change was announced.
const DefaultDirectoryMaxAge = time.Minute

// directory is one loaded state, immutable once built.
type directory struct {
	gen    uint64 // the invalidation count it was loaded after
	loaded time.Time
	byAddr map[addrKey]*addrEntry
}

type addrKey struct {
	org int64
	ip  string
}

// addrEntry is one box address's hosts and its /vllm/config answer.
type addrEntry struct {
	hosts []store.Host
	body  []byte // the JSON of fleetapi.Config, as writeJSON would send it
}

// Directory serves the fleet endpoints' reads from memory. Safe for
// concurrent use.
type Directory struct {
	st     DirectoryStore
	now    func() time.Time
	maxAge time.Duration

	gen atomic.Uint64 // bumped by Invalidate
	cur atomic.Pointer[directory]
	// keys are the fleet keys found by lookup since the last
	// invalidation (unrevoked then); unknown lookups are not kept, so a
	// caller cannot grow it.
	keys atomic.Pointer[map[string]store.FleetKey]

	mu        sync.Mutex // serialises loads and key additions
	retryLoad time.Time  // guarded by mu: no reload before, after a failed one
}

// NewDirectory returns an empty directory over st; it loads on first use.
func NewDirectory(st DirectoryStore, now func() time.Time) *Directory {
	if now == nil {
		now = time.Now
	}
	d := &Directory{st: st, now: now, maxAge: DefaultDirectoryMaxAge}
	d.gen.Store(1)
	d.keys.Store(&map[string]store.FleetKey{})
	return d
}

// Invalidate makes the next request reload the hosts and forget the keys
// (a revoked one stops working at once).
func (d *Directory) Invalidate() {
	d.mu.Lock()
	d.gen.Add(1)
	d.keys.Store(&map[string]store.FleetKey{})
	d.retryLoad = time.Time{}
	d.mu.Unlock()
}

// current returns the directory, reloading it first when invalidated or
// older than maxAge. A failed reload returns the previous one when there
// is one.
func (d *Directory) current(ctx context.Context) (*directory, error) {
	if cur := d.cur.Load(); cur != nil && cur.gen == d.gen.Load() && d.now().Sub(cur.loaded) < d.maxAge {
		return cur, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	gen, cur := d.gen.Load(), d.cur.Load()
	now := d.now()
	if cur != nil && cur.gen == gen && now.Sub(cur.loaded) < d.maxAge {
		return cur, nil // another request reloaded it while this one waited
	}
	if cur != nil && now.Before(d.retryLoad) {
		return cur, nil
	}
	hosts, err := d.st.ListLiveHosts(ctx)
	if err != nil {
		d.retryLoad = now.Add(time.Second)
		if cur != nil && ctx.Err() == nil {
			return cur, nil
		}
		return nil, err
	}
	next := &directory{gen: gen, loaded: now, byAddr: map[addrKey]*addrEntry{}}
	for _, h := range hosts {
		k := addrKey{h.OrgID, h.IP}
		e := next.byAddr[k]
		if e == nil {
			e = &addrEntry{}
			next.byAddr[k] = e
		}
		e.hosts = append(e.hosts, h)
	}
	for k, e := range next.byAddr {
		e.body = configBody(k.ip, e.hosts)
	}
	d.cur.Store(next)
	return next, nil
}

// configBody is the /vllm/config answer for the box at ip with hosts.
func configBody(ip string, hosts []store.Host) []byte {
	out := fleetapi.Config{IP: ip, Assignments: make([]fleetapi.Assignment, 0, len(hosts))}
	for i := range hosts {
		out.Assignments = append(out.Assignments, AssignmentOf(&hosts[i]))
	}
	b, err := json.Marshal(out)
	if err != nil { // a Config always encodes; keep the endpoint answering
		return []byte(`{"ip":"","assignments":[]}` + "\n")
	}
	return append(b, '\n')
}

// hostsAt returns the org's live hosts at ip and their /vllm/config body
// (nil body: none there).
func (d *Directory) hostsAt(ctx context.Context, org int64, ip string) ([]store.Host, []byte, error) {
	cur, err := d.current(ctx)
	if err != nil {
		return nil, nil, err
	}
	if e := cur.byAddr[addrKey{org, ip}]; e != nil {
		return e.hosts, e.body, nil
	}
	return nil, nil, nil
}

// fleetKey finds an unrevoked fleet key by lookup: from memory when it was
// found since the last invalidation, else from the store.
func (d *Directory) fleetKey(ctx context.Context, lookup string) (*store.FleetKey, error) {
	if k, ok := (*d.keys.Load())[lookup]; ok {
		return &k, nil
	}
	gen := d.gen.Load()
	k, err := d.st.FleetKeyByLookup(ctx, lookup)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.gen.Load() == gen { // not revoked meanwhile, as far as this replica knows
		cur := *d.keys.Load()
		next := make(map[string]store.FleetKey, len(cur)+1)
		for l, v := range cur {
			next[l] = v
		}
		next[lookup] = *k
		d.keys.Store(&next)
	}
	d.mu.Unlock()
	return k, nil
}
