package fleet

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
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
// announcement can leave stale: the fleet keys belong to the directory
// they were found under, so a reload forgets them, and a key revoked on a
// replica whose announcement was missed stops working here within MaxAge.
// A failed reload keeps the previous directory serving: a box gets the
// assignment it already has, not an error, while the store is down. After
// an invalidation the previous directory's keys are not trusted any more:
// each request looks its key up again.

// DirectoryStore is what the directory reads when it (re)loads, never per
// request.
type DirectoryStore interface {
	ListLiveHosts(ctx context.Context) ([]store.Host, error)
	FleetKeyByLookup(ctx context.Context, lookup string) (*store.FleetKey, error)
}

// DefaultDirectoryMaxAge bounds how long a directory serves without a
// reload when no change was announced.
const DefaultDirectoryMaxAge = time.Minute

// directoryLoadTimeout bounds one reload. The reload runs apart from the
// request that started it (others wait for it), so a client that leaves
// does not cut it short.
const directoryLoadTimeout = 10 * time.Second

// directoryRetry is how long a failed reload is not retried, unless a
// change is announced meanwhile.
const directoryRetry = time.Second

// directory is one loaded state: immutable once built, but for the fleet
// keys found while it serves.
type directory struct {
	gen    uint64 // the invalidation count it was loaded after
	loaded time.Time
	byAddr map[addrKey]*addrEntry
	// keys are the fleet keys found by lookup while this directory
	// serves (unrevoked then), copy on write; unknown lookups are not
	// kept, so a caller cannot grow it. A reload starts empty.
	keys atomic.Pointer[map[string]store.FleetKey]
}

// addKey remembers k, found by lookup.
func (dir *directory) addKey(lookup string, k store.FleetKey) {
	for {
		cur := dir.keys.Load()
		next := make(map[string]store.FleetKey, len(*cur)+1)
		for l, v := range *cur {
			next[l] = v
		}
		next[lookup] = k
		if dir.keys.CompareAndSwap(cur, &next) {
			return
		}
	}
}

type addrKey struct {
	org int64
	ip  string
}

// addrEntry is one box address's hosts and its /vllm/config answer.
type addrEntry struct {
	hosts []store.Host
	body  []byte // the JSON of fleetapi.Config, as writeJSON would send it
	// judged is what a report from the address is judged on, but for the
	// stored report itself: each host's id, current and applied revision
	// and apply request (reportBasis).
	judged string
}

// Directory serves the fleet endpoints' reads from memory. Safe for
// concurrent use.
type Directory struct {
	st     DirectoryStore
	now    func() time.Time
	maxAge time.Duration

	gen   atomic.Uint64 // bumped by Invalidate
	cur   atomic.Pointer[directory]
	retry atomic.Pointer[retryAt] // set by a failed reload

	loadMu  sync.Mutex // guards loading; never held across a store call
	loading *dirLoad   // the reload under way; nil when none
}

// retryAt holds reloads back after a failed one, until at, unless a
// change is announced (gen moves on).
type retryAt struct {
	gen uint64
	at  time.Time
}

// dirLoad is one reload, which every request that needs it waits for.
type dirLoad struct {
	gen  uint64
	done chan struct{} // closed when dir and err are set
	dir  *directory
	err  error
}

// NewDirectory returns an empty directory over st, timed by now (nil:
// time.Now); it loads on first use.
func NewDirectory(st DirectoryStore, now func() time.Time) *Directory {
	if now == nil {
		now = time.Now
	}
	d := &Directory{st: st, now: now, maxAge: DefaultDirectoryMaxAge}
	d.gen.Store(1)
	return d
}

// Invalidate makes the next request reload the hosts and look fleet keys
// up again (a revoked one stops working at once). It only bumps a
// counter, so it is safe to call under any lock (snapshot.OnSwap) and
// never waits for a reload under way.
func (d *Directory) Invalidate() { d.gen.Add(1) }

// current returns the directory, reloading it first when invalidated or
// older than maxAge. A failed reload returns the previous one when there
// is one. A request that waits for another's reload stops waiting when
// ctx ends; the reload goes on for the others.
func (d *Directory) current(ctx context.Context) (*directory, error) {
	for {
		gen, cur, now := d.gen.Load(), d.cur.Load(), d.now()
		if cur != nil && cur.gen == gen && now.Sub(cur.loaded) < d.maxAge {
			return cur, nil
		}
		if r := d.retry.Load(); cur != nil && r != nil && r.gen == gen && now.Before(r.at) {
			return cur, nil
		}
		d.loadMu.Lock()
		l, mine := d.loading, false
		if l == nil {
			l, mine = &dirLoad{gen: gen, done: make(chan struct{})}, true
			d.loading = l
		}
		d.loadMu.Unlock()
		if mine {
			d.load(ctx, l, now)
		} else {
			select {
			case <-l.done:
			case <-ctx.Done():
				if cur != nil {
					return cur, nil
				}
				return nil, ctx.Err()
			}
		}
		if l.err != nil {
			if cur := d.cur.Load(); cur != nil {
				return cur, nil
			}
			return nil, l.err
		}
		if l.gen >= gen {
			return l.dir, nil
		}
		// That reload began before the change this request saw: reload.
	}
}

// load runs l (the only reload under way) under its own deadline, not
// ctx's cancellation, and publishes it.
func (d *Directory) load(ctx context.Context, l *dirLoad, now time.Time) {
	defer func() {
		d.loadMu.Lock()
		d.loading = nil
		d.loadMu.Unlock()
		close(l.done)
	}()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), directoryLoadTimeout)
	hosts, err := d.st.ListLiveHosts(lctx)
	cancel()
	if err != nil {
		d.retry.Store(&retryAt{gen: l.gen, at: now.Add(directoryRetry)})
		l.err = err
		return
	}
	next := &directory{gen: l.gen, loaded: now, byAddr: map[addrKey]*addrEntry{}}
	next.keys.Store(&map[string]store.FleetKey{})
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
		e.judged = reportBasis(e.hosts)
	}
	d.cur.Store(next)
	l.dir = next
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

// reportBasis is what judging a report of hosts depends on, but for the
// stored report: a report answered from memory (Handler.report) was
// judged on the same.
func reportBasis(hosts []store.Host) string {
	var b strings.Builder
	for i := range hosts {
		h := &hosts[i]
		b.WriteString(strconv.FormatInt(h.ID, 10) + "|" + Revision(h) + "|" + h.AppliedRevision + "|" + strconv.FormatBool(h.ApplyRequested) + "|")
		if h.Applied != nil {
			b.WriteString(h.Applied.Revision)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// reportBasisAt returns reportBasis of the org's live hosts at ip, as of
// the directory; ok is false when the directory may be behind an
// announced change (a reload failed): then a report is judged on the
// store.
func (d *Directory) reportBasisAt(ctx context.Context, org int64, ip string) (string, bool) {
	cur, err := d.current(ctx)
	if err != nil || cur.gen != d.gen.Load() {
		return "", false
	}
	if e := cur.byAddr[addrKey{org, ip}]; e != nil {
		return e.judged, true
	}
	return "", true
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

// fleetKey finds an unrevoked fleet key by lookup: from memory when the
// current directory found it already, else from the store. The directory
// is reloaded first when it is due, which forgets the keys it had.
func (d *Directory) fleetKey(ctx context.Context, lookup string) (*store.FleetKey, error) {
	cur, err := d.current(ctx)
	if err != nil {
		return nil, err
	}
	// A directory serving after a failed reload that followed a change
	// keeps its hosts, not its keys: the change may be a revocation.
	trusted := func() bool { return cur.gen == d.gen.Load() }
	if trusted() {
		if k, ok := (*cur.keys.Load())[lookup]; ok {
			return &k, nil
		}
	}
	k, err := d.st.FleetKeyByLookup(ctx, lookup)
	if err != nil {
		return nil, err
	}
	if trusted() { // not revoked meanwhile, as far as this replica knows
		cur.addKey(lookup, *k)
	}
	return k, nil
}
