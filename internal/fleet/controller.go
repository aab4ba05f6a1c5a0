package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/netguard"
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
	// a probe carries the host's key, and a 3xx fails the probe.
	Client         *http.Client
	AllowLinkLocal bool
	// Lease, when set, elects the one replica that runs the controller
	// (a PostgreSQL advisory lock); the others sweep nothing.
	Lease Lease
	// Registered, when set, reports whether the request path routes to a
	// serving host (its target is in its route). A serving host that is not
	// routed, because someone deleted its route or target by hand, is
	// registered again.
	Registered func(h *store.Host) bool
}

// Lease is held by at most one replica at a time.
type Lease interface {
	Held(ctx context.Context) bool
	Release()
}

func (c *ControllerConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.FailAfter <= 0 {
		c.FailAfter = 3
	}
	if c.RecoverAfter <= 0 {
		c.RecoverAfter = 1
	}
	if c.Parallel <= 0 {
		c.Parallel = 16
	}
	if c.Client == nil { // probes carry host keys: never to link-local or metadata addresses
		c.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: netguard.Dialer(c.AllowLinkLocal).DialContext,
			MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second}}
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

	mu     sync.Mutex
	health map[int64]*hostHealth
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
}

// NewController returns a controller over st; changed is called after each
// sweep that wrote a registration change.
func NewController(st ControllerStore, cfg ControllerConfig, log *slog.Logger, changed func(context.Context)) *Controller {
	cfg.defaults()
	return &Controller{st: st, cfg: cfg, log: log, changed: changed, health: map[int64]*hostHealth{}}
}

// Run sweeps every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	defer c.cfg.Client.CloseIdleConnections() // no keep-alive outlives the controller
	if c.cfg.Lease != nil {
		defer c.cfg.Lease.Release()
	}
	for {
		c.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.cfg.Ticks: // a nil channel never delivers
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
		return
	}
	hosts, err := c.st.ListLiveHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("fleet controller: cannot list hosts; registrations stay as they are", "err", err)
		}
		return
	}
	results := make([]probeResult, len(hosts))
	sem := make(chan struct{}, c.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			results[i].served, results[i].err = c.probe(ctx, &hosts[i])
		}(i)
	}
	wg.Wait()
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

// probeResult is one probe of a host: nil err when it serves, and the
// context its model card reports.
type probeResult struct {
	err    error
	served int
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
		hh.served = res.served
	} else {
		hh.fail++
		hh.ok = 0
		hh.lastErr = probeErr.Error()
	}
	ok, fail := hh.ok, hh.fail
	prev, served := hh.registered, hh.served
	c.mu.Unlock()

	reg, key := registration(h, served)
	lost := probeErr == nil && h.State == store.HostServing && prev == key &&
		c.cfg.Registered != nil && !c.cfg.Registered(h)
	if lost {
		c.log.Warn("fleet host serves but is not routed (its route or target was removed by hand): registering it again",
			"host", h.ID, "model_name", h.ModelName)
	}
	switch {
	case ok >= c.cfg.RecoverAfter && (h.State != store.HostServing || prev != key || lost):
		if err := c.st.RegisterHost(ctx, h.ID, reg); err != nil {
			c.log.Error("fleet controller: register failed; will retry", "host", h.ID, "err", err)
			return false
		}
		c.setRegistered(h.ID, key)
		if h.State != store.HostServing {
			c.log.Info("fleet host serving: registered", "host", h.ID, "ip", h.IP, "port", h.Port, "model_name", h.ModelName)
		}
		return true
	case fail >= c.cfg.FailAfter && h.State == store.HostServing:
		if err := c.st.DeregisterHost(ctx, h.ID, store.HostDown); err != nil {
			c.log.Error("fleet controller: deregister failed; will retry", "host", h.ID, "err", err)
			return false
		}
		c.setRegistered(h.ID, "")
		c.log.Warn("fleet host down: deregistered", "host", h.ID, "ip", h.IP, "port", h.Port, "model_name", h.ModelName,
			"failed_probes", fail, "err", probeErr)
		return true
	case probeErr != nil && fail == 1 && h.State != store.HostServing:
		c.log.Debug("fleet host not serving yet", "host", h.ID, "state", h.State, "err", probeErr)
	}
	return false
}

func (c *Controller) setRegistered(id int64, key string) {
	c.mu.Lock()
	if hh := c.health[id]; hh != nil {
		hh.registered = key
	}
	c.mu.Unlock()
}

// probe reports nil when h's vLLM is serving: /health answers 200 and
// /v1/models lists the recipe's served model, with the context that model's
// card reports (max_model_len; 0 when absent). /v1/models alone is not
// enough, because it answers while the engine still loads.
func (c *Controller) probe(ctx context.Context, h *store.Host) (int, error) {
	port, recipe := running(h)
	if recipe == nil {
		return 0, fmt.Errorf("host has no vllm recipe")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	addr, err := netip.ParseAddr(h.IP)
	if err != nil {
		return 0, fmt.Errorf("bad host address: %w", err)
	}
	base := "http://" + netip.AddrPortFrom(addr, uint16(port)).String()
	if err := c.get(ctx, base+"/health", "", nil); err != nil {
		return 0, fmt.Errorf("/health: %w", err)
	}
	var models struct {
		Data []struct {
			ID          string          `json:"id"`
			MaxModelLen json.RawMessage `json:"max_model_len"`
		} `json:"data"`
	}
	if err := c.get(ctx, base+"/v1/models", h.APIKey.Reveal(), &models); err != nil {
		return 0, fmt.Errorf("/v1/models: %w", err)
	}
	want := recipe.ServedName()
	for _, m := range models.Data {
		if m.ID == want {
			// A card without a believable value leaves the recipe's flag.
			served, err := strconv.ParseInt(string(m.MaxModelLen), 10, 32)
			if err != nil || served <= 0 {
				served = 0
			}
			return int(served), nil
		}
	}
	return 0, fmt.Errorf("/v1/models does not list the recipe's model %q", want)
}

func (c *Controller) get(ctx context.Context, url, key string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, errRedirect) {
			return errRedirect // without the url.Error's Location
		}
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
	}
	return nil
}

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
