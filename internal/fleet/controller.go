package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/defaults"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/h1client"
	"github.com/rolter/rolter/internal/httpbody"
	"github.com/rolter/rolter/internal/netguard"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store"
)

// ControllerConfig tunes health-gated registration.
type ControllerConfig struct {
	// Interval between probe sweeps (default 10s).
	Interval time.Duration
	// Ticks, when set, is received from in addition to the Interval
	// ticker, each receive starting a sweep. Run receives only between
	// sweeps, so a test that has sent n+1 times knows n sweeps finished.
	Ticks <-chan time.Time
	// Timeout of one host's probe, /health and /v1/models together
	// (default 5s).
	Timeout time.Duration
	// CardEvery is how often the probe of a serving host whose probes
	// pass reads /v1/models (default 1m); the other probes ask /health
	// only. Every probe of a host that is not serving, was not
	// registered by this controller, failed its last probe, or runs
	// another revision or port than when its model list was last read,
	// reads it.
	CardEvery time.Duration
	// FailAfter consecutive failed probes take a serving host down
	// (default 3).
	FailAfter int
	// RecoverAfter consecutive good probes register a host (default 1).
	RecoverAfter int
	// Parallel bounds probes in flight (default 16).
	Parallel int
	// Client sends the probes; nil uses a client without proxies that
	// refuses link-local and metadata addresses unless AllowLinkLocal.
	// Redirects are never followed, whatever the client's CheckRedirect:
	// a probe carries the host's key, and a 3xx fails the probe. With an
	// Interval over readiness.ProbeIdleTimeout no probe connection is
	// kept between sweeps: the last request of a probe closes its
	// connection, and a sweep closes what is left idle.
	Client         *http.Client
	AllowLinkLocal bool
	// Dial, when set (ProbeDialer), dials the probes that close their connection (an
	// Interval over readiness.ProbeIdleTimeout) instead of Client: they
	// are sent through the controller's own h1client transport, which
	// costs far less than net/http's for a connection used once (no
	// goroutines per connection). It must refuse what Client's dialer
	// refuses. With neither
	// Client nor Dial set, the default dialer (AllowLinkLocal) is used
	// this way.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Lease, when set, elects the one replica that runs the controller
	// (a PostgreSQL advisory lock); the others sweep nothing.
	Lease Lease
	// Registered, when set, reports whether the request path routes to a
	// serving host (its target is in its route). A serving host that is not
	// routed, because someone deleted its route or target by hand, is
	// registered again.
	Registered func(h *store.Host) bool

	// Drains, when set, tells the controller what this replica's request
	// path has in flight to a draining host; without it a drain lasts
	// until its deadline.
	Drains Drains
	// DrainInterval is how often running drains are checked (default 1s).
	DrainInterval time.Duration
	// DrainTicks, when set, is received from in addition to the
	// DrainInterval ticker, each receive checking the drains once.
	DrainTicks <-chan time.Time
	// PeersUncounted is set when other replicas may route too (several
	// gateways on one PostgreSQL store): their in-flight requests are not
	// counted here, so a drain ends at its deadline only (they cut theirs
	// there too).
	PeersUncounted bool
	// Now is the clock drains and liveness ages are timed by (default
	// time.Now).
	Now func() time.Time

	// Readings, when set, receives each probe of a registered host, so the
	// readiness cache records it instead of probing the host again: one
	// prober per host (readiness.Cache.Feed).
	Readings Readings

	// LastFetch, when set, is the latest GET /vllm/config of a host this
	// replica served (Handler.LastFetch): the liveness gauge uses it when
	// it is newer than the store's, which may lag by the liveness batch.
	LastFetch func(id int64) (time.Time, bool)

	// Changes, when set, moves whenever hosts may have changed
	// (Handler.Generation: every snapshot swap, admin write to hosts,
	// announcement). The drain checks then list hosts only when it moved
	// or while a drain runs, not every DrainInterval: a drain starts with
	// a write that moves it.
	Changes func() uint64

	// Registry, when set, receives the fleet metrics (metrics.go).
	Registry prometheus.Registerer
	// OrgName names an org for metric labels; nil or "" labels it by id.
	OrgName func(id int64) string
}

// Drains is the request path's view of a draining host, on this replica.
type Drains interface {
	// InFlight returns the requests in flight to the provider's targets
	// on this replica, and whether this replica's routing table already
	// excludes the provider (the drain reached it). A drain completes
	// only when both say so: out of routing, nothing in flight.
	InFlight(providerID int64) (n int64, routedOut bool)
}

// Readings records a probe of a registered host's provider, made by the
// controller, as the readiness cache's own; Feed reports whether it did.
// Status says, in Stale, which models the request path found the
// provider no longer serves: while there are any, each probe reads the
// model list, which clears them once it lists them again.
type Readings interface {
	Feed(providerID int64, r readiness.Reading) bool
	Status(providerID int64) (readiness.Status, bool)
}

// Lease is held by at most one replica at a time.
type Lease interface {
	Held(ctx context.Context) bool
	Release()
}

func (c *ControllerConfig) defaults() {
	defaults.Set(&c.Interval, 10*time.Second)
	defaults.Set(&c.Timeout, 5*time.Second)
	defaults.Set(&c.CardEvery, time.Minute)
	defaults.Set(&c.FailAfter, 3)
	defaults.Set(&c.RecoverAfter, 1)
	defaults.Set(&c.Parallel, 16)
	defaults.Set(&c.DrainInterval, time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Client == nil { // probes carry host keys: never to link-local or metadata addresses
		c.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: netguard.Dialer(c.AllowLinkLocal).DialContext,
			MaxIdleConnsPerHost: 1, IdleConnTimeout: readiness.ProbeIdleTimeout}}
	}
	// A copy, so the caller's client keeps its own policy: Go's client
	// forwards Authorization on a redirect to the same host name, any
	// port, so following one would hand the host key to whatever listens
	// there.
	own := *c.Client
	own.CheckRedirect = refuseRedirect
	c.Client = &own
}

// errRedirect fails a probe that was answered with a redirect.
var errRedirect = errors.New("answered with a redirect; probes do not follow redirects")

func refuseRedirect(*http.Request, []*http.Request) error { return errRedirect }

// ControllerStore is the part of store.Store the controller uses.
// RegisterHost must be idempotent, and RegisterHost and DeregisterHost must
// each be one transaction, as store.Store documents: the controller
// re-asserts a registration after a restart and relies on a host's route
// target, provider and state changing together.
type ControllerStore interface {
	ListLiveHosts(ctx context.Context) ([]store.Host, error)
	RegisterHost(ctx context.Context, id int64, reg store.HostRegistration) error
	DeregisterHost(ctx context.Context, id int64, state string) error
	StartDrain(ctx context.Context, orgID, id int64, check store.PoolCheck, at time.Time) error
	MarkDrained(ctx context.Context, id int64, at time.Time) error
	// GetHost reads back a host's provider slug after its first
	// registration (registeredLog).
	GetHost(ctx context.Context, orgID, id int64) (*store.Host, error)
}

// Controller probes every live host and keeps the rule "a host's route
// target exists if and only if its vLLM is serving": it registers a host on
// the healthy transition and deregisters it after FailAfter failed probes.
// It never retires a host. Health is kept in memory (a live measurement,
// rebuilt from probes after a restart); registration is written to the
// store, so every replica routes alike.
type Controller struct {
	st      ControllerStore
	cfg     ControllerConfig
	log     *slog.Logger
	changed func(context.Context) // publishes a registration to the request path

	metrics *metrics

	// closeConns: probe connections are not kept between sweeps (an
	// Interval over readiness.ProbeIdleTimeout).
	closeConns bool
	// probes, when set (cfg.Dial, with closeConns), sends the probes
	// rather than cfg.Client: an h1client transport over cfg.Dial, used
	// without an http.Client (whose per-request context and header copy
	// cost more than the exchange allocates); it returns a 3xx as is,
	// and get refuses it.
	probes *h1client.Client

	mu     sync.Mutex
	health map[int64]*hostHealth
	// samples are the hosts as last listed, for the gauges.
	samples []hostSample
	// drainsSeen is the Changes value of the last drain check's listing
	// (0: none yet) and drainsOpen whether it found a drain not done.
	drainsSeen uint64
	drainsOpen bool
}

type hostHealth struct {
	ok, fail int
	// registered is the registration this process last wrote or confirmed;
	// empty until then, so a restarted controller re-asserts the store.
	registered string
	lastErr    string
	// served is the context the box's /v1/models card reports
	// (max_model_len) at the last good probe; 0 when it reports none.
	served int
	// skew is what the last probe that read the model list found served
	// other than the running recipe says; replaced, never modified.
	skew []Skew
	// cardAt is when a probe last read the model list and found the
	// running recipe's model there, for what cardKey names; zero when the
	// last probe failed.
	cardAt  time.Time
	cardKey string
}

// NewController returns a controller over st; changed is called after each
// sweep that wrote a registration change.
func NewController(st ControllerStore, cfg ControllerConfig, log *slog.Logger, changed func(context.Context)) *Controller {
	if cfg.Client == nil && cfg.Dial == nil {
		cfg.Dial = ProbeDialer(netguard.Dialer(cfg.AllowLinkLocal)).DialContext
	}
	cfg.defaults()
	c := &Controller{st: st, cfg: cfg, log: log, changed: changed, health: map[int64]*hostHealth{}, metrics: newMetrics(),
		closeConns: cfg.Interval > readiness.ProbeIdleTimeout}
	if c.closeConns && cfg.Dial != nil {
		c.probes = h1client.New(h1client.Config{Dial: cfg.Dial, MaxIdlePerHost: 1, IdleTimeout: readiness.ProbeIdleTimeout})
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(collector{c})
	}
	return c
}

// ProbeDialer is d for the probes that close their connection
// (ControllerConfig.Dial): without TCP keep-alive, which a connection
// used for one probe never needs and which costs four setsockopt calls
// per dial, one probe per host every interval.
func ProbeDialer(d *net.Dialer) *net.Dialer {
	p := *d
	p.KeepAlive = -1
	p.KeepAliveConfig = net.KeepAliveConfig{Enable: false}
	return &p
}

// Run sweeps every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	dt := time.NewTicker(c.cfg.DrainInterval)
	defer dt.Stop()
	defer c.cfg.Client.CloseIdleConnections() // no keep-alive outlives the controller
	if c.probes != nil {
		defer c.probes.CloseIdleConnections()
	}
	if c.cfg.Lease != nil {
		defer c.cfg.Lease.Release()
	}
	for {
		c.Sweep(ctx)
		if !c.nextSweep(ctx, t.C, dt.C) {
			return
		}
	}
}

// nextSweep waits for the next sweep, checking drains meanwhile; false
// when ctx ended.
func (c *Controller) nextSweep(ctx context.Context, sweep, drains <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-sweep:
			return true
		case <-c.cfg.Ticks: // a nil channel never delivers
			return true
		case <-drains:
			c.CheckDrains(ctx)
		case <-c.cfg.DrainTicks:
			c.CheckDrains(ctx)
		}
	}
}

// Sweep probes every live host once and applies the transitions. A
// replica that does not hold the lease forgets what it knew, so that when
// it takes over it re-asserts every registration from fresh probes.
func (c *Controller) Sweep(ctx context.Context) {
	if c.cfg.Lease != nil && !c.cfg.Lease.Held(ctx) {
		c.mu.Lock()
		clear(c.health)
		c.mu.Unlock()
		c.forget()
		return
	}
	hosts, err := c.st.ListLiveHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("fleet controller: cannot list hosts; registrations stay as they are", "err", err)
		}
		return
	}
	c.sample(hosts)
	results := make([]probeResult, len(hosts))
	sem := make(chan struct{}, c.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			results[i] = c.probe(ctx, &hosts[i])
			c.feed(ctx, &hosts[i], results[i])
		}(i)
	}
	wg.Wait()
	if c.closeConns {
		// A probe that failed before its last request left its
		// connection idle; nothing is kept until the next sweep.
		if c.probes != nil {
			c.probes.CloseIdleConnections()
		} else {
			c.cfg.Client.CloseIdleConnections()
		}
	}
	if ctx.Err() != nil {
		return
	}
	wrote := false
	live := make(map[int64]bool, len(hosts))
	for i := range hosts {
		live[hosts[i].ID] = true
		if c.apply(ctx, &hosts[i], results[i]) {
			wrote = true
		}
	}
	c.mu.Lock()
	for id := range c.health {
		if !live[id] {
			delete(c.health, id)
		}
	}
	c.mu.Unlock()
	if wrote && c.changed != nil {
		c.changed(ctx)
	}
}

// running is the port and recipe h's box runs: the assignment it last
// reported applied while that was current, for as long as it still reports
// that revision; otherwise (a box that never reported, or a report we did
// not record) the current assignment. A recipe or port change therefore
// reaches routing when the box applies it, not when an operator saves it.
func running(h *store.Host) (int, *fleetapi.VLLM) {
	if a := h.Applied; a != nil && a.Revision == h.AppliedRevision && a.Recipe.VLLM != nil && a.Port != 0 {
		return a.Port, a.Recipe.VLLM
	}
	return h.Port, h.Recipe.VLLM
}

// probeResult is one probe of a host: nil err when it serves, the
// context its model card reports, and, when the probe read the model
// list (carded), how what it serves differs from its recipe.
type probeResult struct {
	err    error
	served int
	carded bool
	skew   []Skew
	// reading is what the probe saw, for the readiness cache; nil when it
	// sent no request.
	reading *readiness.Reading
	// cardKey is what a read of the model list that found the model
	// vouches for (cardKey); empty when the probe did not read it.
	cardKey string
	// refused: the box refused the connection, and again at once when
	// dialled a second time. Nothing listens at the address: the host is
	// deregistered by this probe, not after FailAfter (a timeout or an
	// error answer still needs FailAfter in a row).
	refused bool
}

// feed hands a registered host's probe to the readiness cache.
func (c *Controller) feed(ctx context.Context, h *store.Host, res probeResult) {
	if c.cfg.Readings == nil || h.ProviderID == 0 || res.reading == nil || ctx.Err() != nil {
		return
	}
	c.cfg.Readings.Feed(h.ProviderID, *res.reading)
}

// registration is what RegisterHost writes for h, and its identity: a
// change (new port, new served name, new context) re-registers. The
// context is the one the box serves (its card's max_model_len, served),
// not the recipe's flag: a recipe without --max-model-len still gets
// context admission, and one whose flag the engine overrode is admitted
// on what the engine enforces. Only without a card value is the recipe's
// flag used.
func registration(h *store.Host, served int) (store.HostRegistration, string) {
	port, r := running(h)
	if r == nil { // never probed healthy, so never registered
		return store.HostRegistration{}, ""
	}
	ctxLimit := served
	if ctxLimit <= 0 {
		ctxLimit = MaxModelLen(r)
	}
	reg := store.HostRegistration{Port: port, ServedModel: r.ServedName(), ContextLimit: ctxLimit}
	return reg, h.IP + "|" + strconv.Itoa(port) + "|" + reg.ServedModel + "|" + strconv.Itoa(reg.ContextLimit)
}

// apply records one probe result and writes a transition; it reports
// whether the store changed.
func (c *Controller) apply(ctx context.Context, h *store.Host, res probeResult) bool {
	if h.Drain != nil {
		return c.applyDraining(ctx, h, res)
	}
	if c.startDrain(ctx, h) {
		return true
	}
	probeErr := res.err
	c.mu.Lock()
	hh := c.health[h.ID]
	if hh == nil {
		hh = &hostHealth{}
		c.health[h.ID] = hh
	}
	if probeErr == nil {
		hh.ok++
		hh.fail = 0
		hh.lastErr = ""
	} else {
		hh.fail++
		hh.ok = 0
		hh.lastErr = probeErr.Error()
	}
	c.noteCard(hh, res)
	c.noteSkew(h, hh, res)
	ok, fail := hh.ok, hh.fail
	prev, served := hh.registered, hh.served
	c.mu.Unlock()

	reg, key := registration(h, served)
	lost := probeErr == nil && res.carded && h.State == store.HostServing && prev == key &&
		c.cfg.Registered != nil && !c.cfg.Registered(h)
	if lost {
		c.hostLog(h).Warn("fleet host serves but is not routed (its route or target was removed by hand): registering it again",
			"model_name", h.ModelName)
	}
	switch {
	case ok >= c.cfg.RecoverAfter && (h.State != store.HostServing || prev != key || lost):
		if err := c.st.RegisterHost(ctx, h.ID, reg); err != nil {
			c.hostLog(h).Error("fleet controller: register failed; will retry", "err", err)
			return false
		}
		c.setRegistered(h.ID, key)
		if h.State != store.HostServing {
			c.registeredLog(ctx, h).Info("fleet host serving: registered", "ip", h.IP, "port", h.Port, "model_name", h.ModelName)
		}
		return true
	case (fail >= c.cfg.FailAfter || res.refused) && h.State == store.HostServing:
		if err := c.st.DeregisterHost(ctx, h.ID, store.HostDown); err != nil {
			c.hostLog(h).Error("fleet controller: deregister failed; will retry", "err", err)
			return false
		}
		c.setRegistered(h.ID, "")
		c.hostLog(h).Warn("fleet host down: deregistered", "ip", h.IP, "port", h.Port, "model_name", h.ModelName,
			"failed_probes", fail, "err", probeErr)
		return true
	case probeErr != nil && fail == 1 && h.State != store.HostServing:
		c.log.Debug("fleet host not serving yet", "host", h.ID, "state", h.State, "err", probeErr)
	}
	return false
}

// registeredLog is hostLog for a host RegisterHost has just registered.
// On its first registration h does not know its provider's slug yet:
// RegisterHost picks "host-<id>", or "host-<id>-<n>" when an operator
// holds that slug, so it is read back (one row, on this transition only).
// Should the read fail, the line goes out without it.
func (c *Controller) registeredLog(ctx context.Context, h *store.Host) *slog.Logger {
	if h.ProviderSlug == "" {
		if x, err := c.st.GetHost(ctx, h.OrgID, h.ID); err == nil {
			hc := *h
			hc.ProviderSlug = x.ProviderSlug
			h = &hc
		}
	}
	return c.hostLog(h)
}

// startDrain begins the drain of a routed host whose box is to restart
// (auto_apply, or an apply request without a drain yet), unless it would
// leave its pool with no serving host: then it waits for a later sweep,
// which makes auto-apply over a pool a rolling restart.
func (c *Controller) startDrain(ctx context.Context, h *store.Host) bool {
	if !(h.AutoApply || h.ApplyRequested) || !RestartHeld(h) {
		return false
	}
	if err := c.st.StartDrain(ctx, h.OrgID, h.ID, DrainCheck(h), c.cfg.Now()); err != nil {
		if errors.Is(err, ErrWouldDrainPool) {
			c.log.Debug("fleet host restart waits: it is the pool's last serving host", "host", h.ID, "model_name", h.ModelName)
		} else {
			c.hostLog(h).Error("fleet controller: cannot start a drain; will retry", "err", err)
		}
		return false
	}
	c.hostLog(h).Info("fleet host draining before its restart", "ip", h.IP, "model_name", h.ModelName,
		"auto_apply", h.AutoApply, "drain_timeout", h.DrainTimeout)
	return true
}

// applyDraining handles a probe of a draining host. It stays out of
// routing whatever the probes say (failed probes while vLLM restarts do
// not deregister it, so its route answers 503 pool_draining rather than
// 404), and is registered again, ending the drain, only when the box
// reports the current revision and the probe shows that assignment
// serving.
func (c *Controller) applyDraining(ctx context.Context, h *store.Host, res probeResult) bool {
	c.mu.Lock()
	hh := c.health[h.ID]
	if hh == nil {
		hh = &hostHealth{}
		c.health[h.ID] = hh
	}
	if res.err == nil {
		hh.ok, hh.fail, hh.lastErr = hh.ok+1, 0, ""
	} else {
		hh.ok, hh.fail, hh.lastErr = 0, hh.fail+1, res.err.Error()
	}
	c.noteCard(hh, res)
	c.noteSkew(h, hh, res)
	ok, served := hh.ok, hh.served
	c.mu.Unlock()
	if h.Drain.DrainedAt == nil || h.AppliedRevision != Revision(h) || ok < c.cfg.RecoverAfter {
		return false
	}
	reg, key := registration(h, served)
	if err := c.st.RegisterHost(ctx, h.ID, reg); err != nil {
		c.hostLog(h).Error("fleet controller: register after restart failed; will retry", "err", err)
		return false
	}
	c.setRegistered(h.ID, key)
	out := c.cfg.Now().Sub(h.Drain.StartedAt)
	c.metrics.outOfRouting.WithLabelValues(c.orgName(h.OrgID)).Observe(max(0, out.Seconds()))
	c.hostLog(h).Info("fleet host serves its new revision: back in routing", "ip", h.IP, "model_name", h.ModelName,
		"revision", h.AppliedRevision, "drain_started", h.Drain.StartedAt, "out_of_routing", out.Round(time.Millisecond))
	return true
}

// CheckDrains completes the drains that are done: nothing in flight on
// this replica (once its routing excludes the host), or the deadline
// passed. With PeersUncounted only the deadline counts. The box restarts
// at its next fetch.
func (c *Controller) CheckDrains(ctx context.Context) {
	if c.cfg.Lease != nil && !c.cfg.Lease.Held(ctx) {
		c.forget()
		return
	}
	var gen uint64
	if c.cfg.Changes != nil {
		gen = c.cfg.Changes()
		c.mu.Lock()
		quiet := gen != 0 && gen == c.drainsSeen && !c.drainsOpen
		c.mu.Unlock()
		if quiet {
			return // no drain open, nothing changed since the last look
		}
	}
	hosts, err := c.st.ListLiveHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("fleet controller: cannot list hosts to check drains", "err", err)
		}
		return
	}
	c.sample(hosts)
	open := false
	for i := range hosts {
		open = open || (hosts[i].Drain != nil && hosts[i].Drain.DrainedAt == nil)
	}
	c.mu.Lock()
	c.drainsSeen, c.drainsOpen = gen, open
	c.mu.Unlock()
	now := c.cfg.Now()
	marked := false
	// The box learns that it may restart from its /vllm/config, which is
	// served from memory: a finished drain is announced like a
	// registration, on every replica.
	defer func() {
		if marked && c.changed != nil {
			c.changed(ctx)
		}
	}()
	for i := range hosts {
		h := &hosts[i]
		if h.Drain == nil || h.Drain.DrainedAt != nil {
			continue
		}
		var n int64 = -1
		out := false
		if c.cfg.Drains != nil && h.ProviderID != 0 {
			n, out = c.cfg.Drains.InFlight(h.ProviderID)
		} else if h.ProviderID == 0 {
			n, out = 0, true // never registered: nothing was routed to it
		}
		expired := !now.Before(h.Drain.Deadline)
		idle := out && n == 0 && !c.cfg.PeersUncounted
		if !expired && !idle {
			continue
		}
		if err := c.st.MarkDrained(ctx, h.ID, now); err != nil {
			c.hostLog(h).Error("fleet controller: cannot mark a drain done; will retry", "err", err)
			continue
		}
		marked = true
		took := now.Sub(h.Drain.StartedAt).Round(time.Millisecond)
		outcome := "idle"
		if !idle {
			outcome = "deadline"
		}
		c.metrics.drain.WithLabelValues(c.orgName(h.OrgID), outcome).Observe(max(0, now.Sub(h.Drain.StartedAt).Seconds()))
		if expired && n != 0 {
			c.hostLog(h).Warn("fleet host drain deadline passed: the box restarts now; requests still in flight are cut",
				"model_name", h.ModelName, "in_flight", n, "took", took)
		} else {
			c.hostLog(h).Info("fleet host drained: the box may restart", "model_name", h.ModelName, "took", took)
		}
	}
}

func (c *Controller) setRegistered(id int64, key string) {
	c.mu.Lock()
	if hh := c.health[id]; hh != nil {
		hh.registered = key
	}
	c.mu.Unlock()
}

// probe reports nil err when h's vLLM is serving: /health answers 200 and
// /v1/models lists the recipe's served model, with the context that model's
// card reports (max_model_len; 0 when absent) and what the card shows
// other than the recipe says (servedSkew). /v1/models alone is not enough,
// because it answers while the engine still loads.
//
// A serving host whose model list was read lately for what it runs now
// (needsCard) is asked /health only: one exchange instead of two, the
// card's context and skew kept from that read.
func (c *Controller) probe(ctx context.Context, h *store.Host) probeResult {
	port, recipe := running(h)
	if recipe == nil {
		return probeResult{err: fmt.Errorf("host has no vllm recipe")}
	}
	key := cardKey(h.IP, port, recipe, h.AppliedRevision)
	card := c.needsCard(h, key)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	addr, err := netip.ParseAddr(h.IP)
	if err != nil {
		return probeResult{err: fmt.Errorf("bad host address: %w", err)}
	}
	hostport := netip.AddrPortFrom(addr, uint16(port)).String()
	base := "http://" + hostport
	rd := &readiness.Reading{BaseURL: base + "/v1"}
	_, status, err := c.get(ctx, base, "/health", "", c.closeConns && !card)
	rd.Status = status
	if err != nil {
		rd.Health = err
		// A refused connection is certain only when it is not a moment's
		// accident: dial once more, at once.
		refused := readiness.Refused(err) && c.refusedAgain(ctx, base)
		rd.RefusalConfirmed = refused
		return probeResult{err: fmt.Errorf("/health: %w", err), reading: rd, refused: refused}
	}
	if !card {
		return probeResult{reading: rd}
	}
	var models struct {
		Data []struct {
			ID          string          `json:"id"`
			MaxModelLen json.RawMessage `json:"max_model_len"`
		} `json:"data"`
	}
	body, status, err := c.get(ctx, base, "/v1/models", h.APIKey.Reveal(), c.closeConns)
	rd.Status = status
	if err == nil {
		rd.Models = body
		if jerr := json.Unmarshal(body, &models); jerr != nil {
			err = fmt.Errorf("not JSON: %w", jerr)
		}
	} else {
		rd.ModelsErr = err
	}
	if err != nil {
		return probeResult{err: fmt.Errorf("/v1/models: %w", err), reading: rd}
	}
	cards := make([]servedCard, len(models.Data))
	for i, m := range models.Data {
		// A card without a believable value leaves the recipe's flag.
		n, err := strconv.ParseInt(string(m.MaxModelLen), 10, 32)
		if err != nil || n <= 0 {
			n = 0
		}
		cards[i] = servedCard{ID: m.ID, MaxModelLen: int(n)}
	}
	served, skew, found := servedSkew(recipe, cards)
	if !found {
		return probeResult{err: fmt.Errorf("/v1/models does not list the recipe's model %q", recipe.ServedName()), carded: true, skew: skew, reading: rd}
	}
	return probeResult{served: served.MaxModelLen, carded: true, skew: skew, reading: rd, cardKey: key}
}

// cardKey names what a read of a host's model list vouches for: the
// address and port its box serves on, the served name and context the
// running recipe asks for, and the revision the box reports running.
func cardKey(ip string, port int, r *fleetapi.VLLM, applied string) string {
	return ip + "|" + strconv.Itoa(port) + "|" + r.ServedName() + "|" + strconv.Itoa(MaxModelLen(r)) + "|" + applied
}

// needsCard reports whether h's probe must read its model list: unless h
// serves and is routed (Config.Registered), this controller registered
// it, its last probe passed, and that list was read under CardEvery ago
// for what key names, and the request path has marked none of its models
// stale. So a host is
// registered, re-registered or taken back after a drain only on a probe
// that read the list, a change of what the box runs is checked at its
// first probe, and a box that starts serving another model while its
// /health passes is caught within CardEvery.
func (c *Controller) needsCard(h *store.Host, key string) bool {
	if h.State != store.HostServing || h.Drain != nil || (c.cfg.Registered != nil && !c.cfg.Registered(h)) {
		return true
	}
	if c.cfg.Readings != nil && h.ProviderID != 0 {
		if st, ok := c.cfg.Readings.Status(h.ProviderID); ok && len(st.Stale) > 0 {
			return true
		}
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	hh := c.health[h.ID]
	return hh == nil || hh.registered == "" || hh.fail > 0 || hh.cardKey != key ||
		hh.cardAt.IsZero() || now.Before(hh.cardAt) || now.Sub(hh.cardAt) >= c.cfg.CardEvery
}

// noteCard records what a probe's read of the model list found; hh is
// c.health[h.ID], c.mu held. A probe that did not read it keeps what the
// last one that did found.
func (c *Controller) noteCard(hh *hostHealth, res probeResult) {
	switch {
	case res.err != nil:
		hh.cardAt, hh.cardKey = time.Time{}, ""
	case res.carded:
		hh.served, hh.cardAt, hh.cardKey = res.served, c.cfg.Now(), res.cardKey
	}
}

// refusedAgain asks base's /health a second time and reports whether the
// connection was refused again.
func (c *Controller) refusedAgain(ctx context.Context, base string) bool {
	_, _, err := c.get(ctx, base, "/health", "", c.closeConns)
	return err != nil && readiness.Refused(err)
}

// noteSkew records the skew of a probe that read the model list, logging
// a change; hh is c.health[h.ID], c.mu held.
func (c *Controller) noteSkew(h *store.Host, hh *hostHealth, res probeResult) {
	if !res.carded {
		return
	}
	if !slices.Equal(hh.skew, res.skew) {
		for _, k := range res.skew {
			c.hostLog(h).Warn("fleet host serves other than its recipe says", "model_name", h.ModelName,
				"field", k.Field, "recipe", k.Recipe, "served", k.Served, "fatal", k.Fatal)
		}
		if len(res.skew) == 0 {
			c.hostLog(h).Info("fleet host serves what its recipe says again", "model_name", h.ModelName)
		}
	}
	hh.skew = res.skew
}

// probeBodyLimit caps a probe's answer body.
const probeBodyLimit = 1 << 20

// get GETs base+path and returns the body of a 200 answer (at most 1
// MiB) and the answer's HTTP status (0 when none came: refused, timed
// out); closeConn closes the connection after it (the probe's last
// request).
func (c *Controller) get(ctx context.Context, base, path, key string, closeConn bool) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Close = closeConn
	req.Header.Set("User-Agent", "rolter-probe")
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	var resp *http.Response
	if c.probes != nil {
		if resp, err = c.probes.RoundTrip(req); err != nil {
			return nil, 0, err
		}
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 && resp.Header.Get("Location") != "" {
			resp.Body.Close() // unread: the connection is not kept
			return nil, resp.StatusCode, errRedirect
		}
	} else if resp, err = c.cfg.Client.Do(req); err != nil {
		if errors.Is(err, errRedirect) {
			status := 0
			if resp != nil { // the redirect itself, its body closed
				status = resp.StatusCode
			}
			return nil, status, errRedirect // without the url.Error's Location
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := httpbody.ReadOK(resp, probeBodyLimit+1)
	if err == nil && len(body) > probeBodyLimit {
		return nil, resp.StatusCode, fmt.Errorf("%w: over %d bytes", errProbeTooLarge, probeBodyLimit)
	}
	return body, resp.StatusCode, err
}

// errProbeTooLarge is a probe answer's body over probeBodyLimit.
var errProbeTooLarge = errors.New("body too large")

// Health reports the controller's view of a host: consecutive good and
// failed probes and the last probe error; known is false before the first
// probe.
func (c *Controller) Health(id int64) (ok, fail int, lastErr string, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hh := c.health[id]
	if hh == nil {
		return 0, 0, "", false
	}
	return hh.ok, hh.fail, hh.lastErr, true
}
