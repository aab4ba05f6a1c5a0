// Package readiness is the gateway's readiness cache: it probes every
// provider in the background and keeps, per provider, whether it is ready
// and what an upstream-metadata provider says it serves (design 003).
//
// # Two kinds of provider
//
// A configured provider (metadata_source "configured") has its model and
// context in rolter's configuration; the cache only watches its health. It
// starts Ready, before any probe: until the first probe the gateway's
// passive health covers it, and a gateway restart must not blackhole
// traffic to a healthy fleet.
//
// An upstream-metadata provider (Provider.Upstream) delegates its model id
// and context to the one inference server at its endpoint. It starts NOT
// ready ("no probe has completed yet") and is ready only while the server is
// healthy AND GET {base}/models lists exactly one model whose card carries a
// context length; for llama.cpp /props must also agree. Anything missing,
// ambiguous, malformed or inconsistent makes it not ready: the gateway never
// routes on a guessed model or context.
//
// # What is probed
//
//	kind                  health probe                 upstream metadata
//	vllm, sglang          GET {root}/health            GET {base}/models
//	llamacpp              GET {root}/health            GET {base}/models, GET {root}/props
//	openai, anthropic     GET {base}/models            (the same response)
//
// root is the base URL without a trailing "/v1". No probe sends a completion
// or any other POST, so probes cost no tokens. (SGLang's /health runs a
// one-token generation inside the engine when it is idle; that is the
// engine's own liveness check, not a billed request.) Every body is read
// through Config.MaxBody.
//
// # State machine
//
//	        FailAfter consecutive failed probes, or unusable
//	        upstream metadata (at once)
//	Ready ─────────────────────────────────────────────▶ not ready
//	      ◀─────────────────────────────────────────────
//	        RecoverAfter consecutive successful probes
//
// A failed probe is an unreachable endpoint, a timeout or a non-2xx answer,
// on /health or on a metadata request. A redirect is a non-2xx answer: a
// probe carries the provider's key and never follows one. Unusable metadata (two models, bad
// JSON, a body over MaxBody, an alias that disagrees, no context) takes an
// upstream provider out at once: there is nothing safe to route on. On a
// successful probe of a ready upstream provider, new facts (a new model or
// context at the same endpoint: the model was replaced) take effect at once.
// A provider that has never been ready becomes ready on its first success
// whatever RecoverAfter says: RecoverAfter damps flapping, and a provider
// that was never up cannot flap.
package readiness

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/h1client"
	"github.com/rolter/rolter/internal/secret"
)

// Provider is what the cache needs to know about one provider.
type Provider struct {
	ID         int64
	Kind       string        // one of the store.Kind* constants; any other kind is probed like openai
	BaseURL    string        // e.g. http://10.0.0.5:8000/v1 (no trailing slash)
	Credential secret.Secret // first pool key; zero if none
	Upstream   bool          // metadata_source == "upstream": discover model id and context
	// Org and Slug name the provider in log lines (never by its id).
	Org, Slug string
}

// Facts are what an upstream provider reports about itself.
type Facts struct {
	ModelID    string
	Context    int      // 0 if unknown; never 0 for a ready upstream provider (no context, not ready)
	Modalities []string // e.g. ["text","image","audio"]; nil if unknown
	Slots      int      // llama.cpp total_slots; 0 if unknown
	Build      string   // llama.cpp build_info
	// Quantization is the model's file type in short form ("Q4_K_M"),
	// from llama.cpp's model_ftype, meta.ftype or GGUF file name (quant.go);
	// "" if unknown.
	Quantization string
}

// Equal reports whether f and o are the same facts.
func (f Facts) Equal(o Facts) bool {
	return f.ModelID == o.ModelID && f.Context == o.Context && f.Slots == o.Slots &&
		f.Build == o.Build && f.Quantization == o.Quantization && slices.Equal(f.Modalities, o.Modalities)
}

// Status is a provider's readiness as last observed.
type Status struct {
	Ready bool
	// Reason says why the provider is not ready; empty when it is. Examples:
	// "health probe failed: GET /health: ... connection refused",
	// "GET /models returned 2 models; an upstream-metadata provider must
	// serve exactly one", "no probe has completed yet".
	Reason string
	// Class is the stable class of Reason, empty when Ready. Reason may
	// carry an upstream's own error text (a connection string, an internal
	// resolver's address): it is for logs and the admin readiness view
	// only. Data-path clients are told Class.
	Class ReasonClass
	// Facts are what an Upstream provider serves; set only while Ready (and
	// zero for configured providers). Modalities is shared: do not modify it.
	Facts     Facts
	LastProbe time.Time // zero before the first probe
	LastError string    // last probe error, kept after recovery for the admin view
	// Stale maps the models the gateway found the upstream no longer
	// serves (MarkStale) to why, until a probe lists them again; nil when
	// none. Shared: do not modify it.
	Stale map[string]string
}

// ReasonNoProbe is the Reason of an upstream provider before its first probe.
const ReasonNoProbe = "no probe has completed yet"

// ReasonClass is why a provider is not ready, in words fixed enough to show
// to any client: it never carries upstream text.
type ReasonClass string

// The reason classes.
const (
	// ClassNotProbed: an upstream-metadata provider before its first probe.
	ClassNotProbed ReasonClass = "not_probed_yet"
	// ClassHealthFailed: the health probe failed (unreachable, a timeout, a
	// non-2xx or redirect answer on /health, or on /models for a hosted API).
	ClassHealthFailed ReasonClass = "health_check_failed"
	// ClassMetadataUnusable: the upstream metadata (/models, /props) could
	// not be read or cannot be routed on (two models, no context, ...).
	ClassMetadataUnusable ReasonClass = "metadata_unusable"
	// ClassRecovering: probes succeed again but not yet RecoverAfter times.
	ClassRecovering ReasonClass = "recovering"
)

// Config tunes the cache. Zero fields take their defaults.
type Config struct {
	Interval     time.Duration // between probes of one provider (default 10s), with ±10% jitter
	Timeout      time.Duration // per probe request (default 5s)
	FailAfter    int           // consecutive failures before a ready provider goes down (default 2)
	RecoverAfter int           // consecutive successes before a down provider is ready (default 1)
	MaxBody      int64         // cap on every probe body read (default 1 MiB)
	// Ticks, when set, is received from in addition to Run's timer: each
	// receive makes Run look again at what is due by the cache's clock
	// (tests that move a clock.Manual).
	Ticks <-chan time.Time
	// Dial, when set with an Interval over ProbeIdleTimeout (no probe
	// connection is kept between probes), dials the probes, which are then
	// sent through the cache's own h1client transport instead of the
	// client New was given: a connection used for one probe costs there a
	// pooled buffer, not net/http's two goroutines and their buffers, so
	// ten thousand providers probed every Interval cost far less CPU and
	// garbage. It must refuse what the client's dialer refuses.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Defaults for the zero fields of Config.
const (
	DefaultInterval     = 10 * time.Second
	DefaultTimeout      = 5 * time.Second
	DefaultFailAfter    = 2
	DefaultRecoverAfter = 1
	DefaultMaxBody      = 1 << 20
)

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FailAfter <= 0 {
		c.FailAfter = DefaultFailAfter
	}
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = DefaultRecoverAfter
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	return c
}

// Cache is the readiness cache. Create it with New; safe for concurrent use.
type Cache struct {
	cfg    Config
	clock  clock.Clock
	client *http.Client
	// probes, when set (Config.Dial with closeConns), sends every probe
	// request instead of client: it returns a 3xx as is, which get fails.
	probes *h1client.Client
	log    *slog.Logger
	// closeConns: every probe request closes its connection (Interval
	// over ProbeIdleTimeout; see there).
	closeConns bool

	// entries is an immutable map swapped by Sync, so Status is one atomic
	// load plus a map read.
	entries atomic.Pointer[map[int64]*entry]

	// sem bounds probes in flight, so ten thousand providers probed "at
	// once" (start-up, ProbeAll) do not burst into ten thousand requests.
	sem chan struct{}

	mu     sync.Mutex    // serializes Sync
	synced chan struct{} // guarded by mu; closed and replaced by every Sync to wake Run

	soonWake chan struct{} // one pending wake-up of Run for ProbeSoon

	shareMu sync.Mutex
	shared  map[shareKey]*sharedProbe // the latest probe of each shared endpoint (share.go)
	// shareSeq numbers shared probes and ProbeAll calls: a ProbeAll
	// applies only the shared probes that started during it.
	shareSeq atomic.Uint64

	onChange atomic.Pointer[func()]
	changes  atomic.Uint64 // changes recorded, counted before announcing them
	notifyMu sync.Mutex    // held while onChange runs; guards announced
	// announced is the count of changes the latest OnChange call started
	// after: it covers them all.
	announced uint64
}

// refuseRedirect is the probe client's CheckRedirect: the 3xx answer itself
// is returned, and get fails it as a non-2xx.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// providerKey is what must stay the same for Sync to keep a provider's state.
type providerKey struct {
	id       int64
	kind     string
	baseURL  string
	upstream bool
}

func keyOf(p Provider) providerKey {
	return providerKey{p.ID, p.Kind, p.BaseURL, p.Upstream}
}

// entry is one provider's state. There is one per provider, ten thousand
// of them in a large catalog, so it keeps nothing twice (issue 21): its
// key is read from provider, and the state machine works on the published
// status rather than on a copy of its own.
type entry struct {
	// provider is the provider as last synced: its key fields never
	// change for one entry (Sync makes a new one when they do), its
	// credential may, without resetting state.
	provider atomic.Pointer[Provider]
	// status is read by Status, written under mu, with a zero LastProbe:
	// a probe that changes nothing else stores no new one (ten thousand
	// providers probed every Interval would each allocate one), and the
	// statuses of providers never probed are shared. lastProbe is
	// LastProbe in UnixNano, 0 before the first probe.
	status    atomic.Pointer[Status]
	lastProbe atomic.Int64

	mu sync.Mutex // serializes probes of this provider; guards tr
	tr tracker
	// queued is set while Run has the entry in its schedule or probes
	// it; only Run's goroutine reads or writes it (schedule.go).
	queued bool
	// seen marks the entry during Sync's check for an unchanged list;
	// only Sync reads or writes it, under the cache's mu.
	seen bool

	// stale is the provider's stale models (stale.go): copy on write under
	// staleMu, which a probe never holds across a request.
	stale   atomic.Pointer[map[string]string]
	staleMu sync.Mutex

	// fed is when (UnixNano, by the cache's clock) Feed last recorded a
	// reading of the provider made by another prober; 0 when never.
	// While it is recent, Run does not probe the provider itself
	// (feed.go).
	fed atomic.Int64
	// soon: ProbeSoon asked for a probe now; Run takes it off when the
	// probe starts, so that repeats before then are one probe.
	soon atomic.Bool
	// shared: another provider has the same endpoint and credential;
	// their probes are shared (share.go). Set by Sync.
	shared atomic.Bool
}

// The published statuses of providers before their first probe, and the
// stale marks of a provider without any: shared by every entry (both are
// replaced, never modified).
var (
	configuredStatus = ptr(Status{Ready: true})
	upstreamStatus   = ptr(Status{Reason: ReasonNoProbe, Class: ClassNotProbed})
	noStale          = new(map[string]string)
)

func ptr[T any](v T) *T { return &v }

func newEntry(p *Provider) *entry {
	e := &entry{}
	e.provider.Store(p)
	e.tr = newTracker(p.Upstream)
	if p.Upstream {
		e.status.Store(upstreamStatus)
	} else {
		// Optimistic: the gateway's passive health covers a configured
		// provider until the first probe.
		e.status.Store(configuredStatus)
	}
	e.stale.Store(noStale)
	return e
}

// id is the provider's id.
func (e *entry) id() int64 { return e.provider.Load().ID }

// current is the status the state machine goes on from: the published
// one, with its LastProbe. e.mu is held.
func (e *entry) current() Status {
	st := *e.status.Load()
	if n := e.lastProbe.Load(); n != 0 {
		st.LastProbe = time.Unix(0, n)
	}
	return st
}

// publish makes st the status Status reports. e.mu is held.
func (e *entry) publish(st Status) {
	if !st.LastProbe.IsZero() {
		// Only forward: a shared observation applied now may be older
		// than the provider's own last probe.
		at := st.LastProbe.UnixNano()
		for {
			cur := e.lastProbe.Load()
			if at <= cur || e.lastProbe.CompareAndSwap(cur, at) {
				break
			}
		}
	}
	st.LastProbe = time.Time{}
	if cur := e.status.Load(); !sameStatus(*cur, st) {
		e.status.Store(&st)
	}
}

// sameStatus reports whether a and b are equal, Stale aside.
func sameStatus(a, b Status) bool {
	return a.Ready == b.Ready && a.Reason == b.Reason && a.Class == b.Class && a.Facts.Equal(b.Facts) &&
		a.LastProbe.Equal(b.LastProbe) && a.LastError == b.LastError
}

// New returns an empty cache; call Sync to give it providers. A nil clock
// is the system clock, a nil client a plain http.Client (each probe request
// has its own Config.Timeout), a nil log discards. The cache uses a copy of
// client that never follows a redirect, whatever client's CheckRedirect
// says: a probe carries the provider's key, and a redirect would hand it to
// wherever the Location points. A 3xx answer is a failed probe.
func New(cfg Config, clk clock.Clock, client *http.Client, log *slog.Logger) *Cache {
	if clk == nil {
		clk = clock.System
	}
	var cl http.Client
	if client != nil {
		cl = *client
	}
	cl.CheckRedirect = refuseRedirect
	client = &cl
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{cfg: cfg.withDefaults(), clock: clk, client: client, log: log, synced: make(chan struct{}),
		sem: make(chan struct{}, maxProbesInFlight), soonWake: make(chan struct{}, 1), shared: map[shareKey]*sharedProbe{}}
	c.closeConns = c.cfg.Interval > ProbeIdleTimeout
	if c.closeConns && c.cfg.Dial != nil {
		// One idle connection per host: a probe's requests before its last
		// reuse it; the last one closes it.
		c.probes = h1client.New(h1client.Config{Dial: c.cfg.Dial, MaxIdlePerHost: 1, IdleTimeout: ProbeIdleTimeout})
	}
	c.entries.Store(&map[int64]*entry{})
	return c
}

// Sync sets the provider list (called on every configuration change). State
// is kept for providers whose (ID, Kind, BaseURL, Upstream) are unchanged
// (a new Credential is used from the next probe); others start fresh. Run,
// if running, starts and stops probe loops to match. Sync does not call the
// OnChange function: the caller is rebuilding its tables already.
func (c *Cache) Sync(ps []Provider) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.entries.Load()
	if edits, same := sameEntries(old, ps); same {
		// Most configuration changes keep every entry (a change to routes,
		// keys or policies, a provider renamed): at ten thousand providers
		// a new map, and a new count of the shared endpoints, would cost
		// every admin write milliseconds (issue 21).
		reshare := false
		for _, p := range edits {
			e := old[p.ID]
			reshare = reshare || e.provider.Load().Credential != p.Credential
			e.provider.Store(ptr(p))
		}
		if reshare {
			c.markShared(old)
		}
		return
	}
	next := make(map[int64]*entry, len(ps))
	for _, p := range ps {
		p = trimmed(p)
		if _, dup := next[p.ID]; dup {
			c.log.Warn("metadata: duplicate provider id; the later one wins", "org", p.Org, "provider", p.Slug)
		}
		if e, ok := old[p.ID]; ok {
			if was := e.provider.Load(); keyOf(*was) == keyOf(p) {
				if *was != p { // the same provider stores nothing new
					e.provider.Store(ptr(p))
				}
				next[p.ID] = e
				continue
			}
		}
		next[p.ID] = newEntry(ptr(p))
	}
	c.markShared(next)
	c.entries.Store(&next)
	close(c.synced)
	c.synced = make(chan struct{})
}

// sameEntries reports whether Sync(ps) keeps exactly old's entries: every
// provider of ps has an entry in old with the same key, and every entry of
// old is one of them, once. edits are the providers of ps (as Sync keeps
// them) that differ from their entry's otherwise. c.mu is held.
func sameEntries(old map[int64]*entry, ps []Provider) (edits []Provider, same bool) {
	if len(ps) != len(old) {
		return nil, false
	}
	same = true
	for _, p := range ps {
		p = trimmed(p)
		e, ok := old[p.ID]
		if !ok || e.seen {
			same = false // a new provider, or a duplicate id
			break
		}
		e.seen = true
		if was := e.provider.Load(); *was != p {
			if keyOf(*was) != keyOf(p) {
				same = false // a new endpoint: its state starts afresh
				break
			}
			edits = append(edits, p)
		}
	}
	for _, e := range old {
		same = same && e.seen // with len(ps) entries seen once each, all were
		e.seen = false
	}
	return edits, same
}

// trimmed is p as Sync keeps it: its base URL without a trailing slash.
func trimmed(p Provider) Provider {
	p.BaseURL = strings.TrimRight(p.BaseURL, "/")
	return p
}

// Status returns the provider's status; ok is false if the provider is
// unknown. It takes no lock: it is called per request.
func (c *Cache) Status(id int64) (Status, bool) {
	e, ok := (*c.entries.Load())[id]
	if !ok {
		return Status{}, false
	}
	st := e.current()
	st.Stale = *e.stale.Load()
	return st, true
}

// OnChange registers fn, called after any provider's Ready or Facts change
// so the gateway can rebuild its tables. Calls never overlap. The change is
// announced before the probe, Feed or MarkStale that made it returns: by
// then an fn call that began after the change has returned (its own, or
// one another change started meanwhile, which covers it). So the gateway's
// table agrees with a change as soon as whatever made it is done, and
// several changes that wait while fn runs share the next call. When fn
// runs, Status already reports the change. Set it before Run.
func (c *Cache) OnChange(fn func()) {
	if fn == nil {
		c.onChange.Store(nil)
		return
	}
	c.onChange.Store(&fn)
}

// announce runs the OnChange function for a change just recorded, unless
// a call that began after it has returned meanwhile; it waits for a call
// under way to end first.
func (c *Cache) announce() {
	fn := c.onChange.Load()
	if fn == nil {
		return
	}
	mine := c.changes.Add(1)
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	if c.announced >= mine {
		return // covered by a call that began after this change
	}
	c.announced = c.changes.Load()
	(*fn)()
}

// ProbeSoon asks for a probe of the provider now, instead of at its next
// interval: the gateway calls it when a connection to the provider was
// refused, so its readiness follows within a probe's time. Repeats before
// that probe starts are one request; an unknown provider is ignored. It
// never blocks. Run's scheduler moves the provider's probe to now, even
// while another prober feeds its readings (Feed).
func (c *Cache) ProbeSoon(id int64) {
	e, ok := (*c.entries.Load())[id]
	if !ok {
		return
	}
	e.soon.Store(true)
	select {
	case c.soonWake <- struct{}{}:
	default: // Run has a wake-up pending already
	}
}

// ProbeAll probes every provider once, concurrently, and returns when done
// (tests and start-up use it). Results of probes cut short by ctx are
// discarded.
func (c *Cache) ProbeAll(ctx context.Context) {
	var wg sync.WaitGroup
	// Shared probes (share.go) count only from this call on.
	after := c.shareSeq.Add(1)
	// A worker starts only when a slot is free: ten thousand providers
	// are not ten thousand goroutines at once, whose stacks (and the
	// runtime's record of each) would outlive the call.
	defer wg.Wait()
	for _, e := range *c.entries.Load() {
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-c.sem }()
			c.probeHeldSince(ctx, e, false, after)
		})
	}
}

// jitter returns Interval ±10%.
func (c *Cache) jitter() time.Duration {
	d := float64(c.cfg.Interval)
	return time.Duration(d * (0.9 + 0.2*rand.Float64()))
}

// maxProbesInFlight is the most probes running at one time.
const maxProbesInFlight = 32

// probe observes one provider and records the result; triggered says that
// ProbeSoon asked for it (see probeHeld).
func (c *Cache) probe(ctx context.Context, e *entry, triggered bool) {
	c.probeSince(ctx, e, triggered, 0)
}

// probeSince is probe where a shared probe (share.go) counts only if it
// started at or after the shared-probe sequence number after (0: any fresh
// one).
func (c *Cache) probeSince(ctx context.Context, e *entry, triggered bool, after uint64) {
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return
	}
	c.probeHeldSince(ctx, e, triggered, after)
}

// probeHeld is probe for a caller that holds a slot of c.sem. A probe
// ProbeSoon asked for (triggered: the gateway's connection was refused)
// that finds the connection refused as well confirms the refusal: the
// provider is not ready at once, not after FailAfter probes.
func (c *Cache) probeHeld(ctx context.Context, e *entry, triggered bool) {
	c.probeHeldSince(ctx, e, triggered, 0)
}

// probeHeldSince is probeHeld with probeSince's after.
func (c *Cache) probeHeldSince(ctx context.Context, e *entry, triggered bool, after uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := *e.provider.Load()
	var o observation
	var at time.Time
	if e.shared.Load() {
		o, at = c.observeShared(ctx, p, triggered, after)
	} else {
		o = c.observe(ctx, p)
		at = c.clock.Now()
	}
	if ctx.Err() != nil {
		return // shutting down or given up on: the observation says nothing about the provider
	}
	o.decisive = triggered && o.refused
	c.record(ctx, e, p, o, nil, at)
}

// record applies o, made at at, to e's state machine, rechecks e's stale marks (with
// models, the body of a GET /models already read, when not nil), logs a
// transition and announces a change. e.mu is held.
func (c *Cache) record(ctx context.Context, e *entry, p Provider, o observation, models []byte, at time.Time) {
	prev := e.current()
	st, changed := e.tr.apply(prev, o, at, c.cfg)
	if c.recheckStale(ctx, e, p, o, models) && ctx.Err() == nil {
		changed = true
		c.log.Info("metadata: a stale model is listed again; back in routing", "org", p.Org, "provider", p.Slug)
	}
	e.publish(st)
	c.logTransition(p, prev, st, o)
	if changed && (*c.entries.Load())[p.ID] == e {
		c.announce()
	}
}

func (c *Cache) logTransition(p Provider, prev, cur Status, o observation) {
	switch {
	case cur.Ready && !prev.Ready:
		c.log.Info("metadata: provider ready", "org", p.Org, "provider", p.Slug, "kind", p.Kind,
			"model", cur.Facts.ModelID, "context", cur.Facts.Context, "previous_class", string(prev.Class),
			"upstream_status", o.status)
	case !cur.Ready && prev.Ready:
		c.log.Warn("metadata: provider not ready", "org", p.Org, "provider", p.Slug, "kind", p.Kind,
			"class", string(cur.Class), "upstream_status", o.status, "reason", cur.Reason)
	case cur.Ready && !cur.Facts.Equal(prev.Facts):
		c.log.Info("metadata: provider facts changed", "org", p.Org, "provider", p.Slug, "kind", p.Kind,
			"model", cur.Facts.ModelID, "context", cur.Facts.Context,
			"previous_model", prev.Facts.ModelID, "previous_context", prev.Facts.Context)
	case !o.ok():
		c.log.Debug("metadata: probe failed", "org", p.Org, "provider", p.Slug, "kind", p.Kind,
			"class", string(o.class), "upstream_status", o.status, "error", o.message())
	}
}
