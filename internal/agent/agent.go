// Package agent is `rolter agent`, the part of rolter that runs on a GPU
// box (design 002, SPEC §7). It fetches the box's assignments from the
// gateway (GET /vllm/config), checks that each model fits the hardware it
// discovers, makes sure the weights are on the box, runs and supervises one
// `vllm serve` per assignment, and reports what it runs and what it sees
// (POST /vllm/report). The wire contract is package fleetapi.
//
// The box keeps serving through a gateway outage: the last configuration
// and what was applied are kept in a state file, and a restarted agent
// starts from it before it reaches the gateway. A new revision restarts
// vLLM only when an operator asked for it (apply) or the host has
// auto_apply.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
)

// Config configures an Agent. Server and FleetKey are required.
type Config struct {
	// Server is the gateway's base URL, e.g. https://rolter.internal.
	Server string
	// FleetKey authenticates the box to the gateway. It is never logged
	// and never passed to vLLM.
	FleetKey secret.Secret
	// StateDir holds state.json and the vLLM logs (vllm-<host_id>.log).
	StateDir string
	// ModelsDir is where weights are looked for and downloaded; default
	// <StateDir>/models.
	ModelsDir string
	// Command runs vLLM; default {"vllm"}. The agent runs Command +
	// ["serve", MODEL, "--port", P] + the recipe's args, with the API key in
	// the environment as VLLM_API_KEY.
	Command []string
	// Interval is how often the configuration is fetched; default 30s.
	// Failed fetches are retried sooner, with backoff up to Interval.
	Interval time.Duration
	// NvidiaSMI is the nvidia-smi executable, looked up on PATH; default
	// "nvidia-smi". When absent no GPU is discovered and the VRAM check is
	// skipped (a warning is logged once).
	NvidiaSMI string
	// StopGrace is how long vLLM may take to stop after SIGTERM before it
	// is killed; default 30s.
	StopGrace time.Duration
	// HTTPClient talks to the gateway and downloads url weights; default a
	// client of the agent's own. Whatever its CheckRedirect, the agent
	// follows no redirect from the gateway (the fleet key stays there) and
	// follows a download's redirects only under downloadRedirect's rules.
	HTTPClient *http.Client
	// Log receives the agent's log; default discarded.
	Log *slog.Logger
}

// Defaults.
const (
	DefaultInterval  = 30 * time.Second
	DefaultStopGrace = 30 * time.Second

	requestTimeout = 30 * time.Second
	maxConfigBody  = 8 << 20
)

// Agent runs the assignments of one box. Create it with New and call Run
// once.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	server   string       // base URL, no trailing slash
	client   *http.Client // to the gateway
	download *http.Client // url weights
	local    *http.Client // vLLM's /version on 127.0.0.1
	own      []*http.Transport

	// Tunables, shortened by tests.
	retryMin, restartMin, restartMax time.Duration

	started atomic.Bool

	// Owned by Run's goroutine.
	children   map[int64]*child
	applied    map[int64]fleetapi.Assignment // what each child was started from
	config     *fleetapi.Config              // last fetched (or loaded)
	errs       map[int64]string              // why a host's assignment does not run
	logged     map[int64]string              // the refusal last logged per host
	pending    map[int64]string              // revision waiting for apply, logged once
	state      stateWriter
	smiWarned  bool
	lastGPUErr string
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Agent, error) {
	if !supported {
		return nil, errUnsupportedOS
	}
	u, err := url.Parse(strings.TrimRight(cfg.Server, "/"))
	if cfg.Server == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("agent: the server must be an http(s) URL")
	}
	if cfg.FleetKey.IsZero() {
		return nil, errors.New("agent: no fleet key")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("agent: no state directory")
	}
	if cfg.ModelsDir == "" {
		cfg.ModelsDir = filepath.Join(cfg.StateDir, "models")
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"vllm"}
	}
	cfg.Command = slices.Clone(cfg.Command)
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.NvidiaSMI == "" {
		cfg.NvidiaSMI = "nvidia-smi"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		cfg:        cfg,
		log:        cfg.Log,
		server:     u.String(),
		retryMin:   min(time.Second, cfg.Interval),
		restartMin: time.Second,
		restartMax: time.Minute,
		children:   map[int64]*child{},
		applied:    map[int64]fleetapi.Assignment{},
		errs:       map[int64]string{},
		logged:     map[int64]string{},
		pending:    map[int64]string{},
		state:      stateWriter{path: filepath.Join(cfg.StateDir, stateFile)},
	}
	base := http.Client{}
	if cfg.HTTPClient != nil {
		base = *cfg.HTTPClient // copies: the caller's client keeps its own policy
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		a.own = append(a.own, tr)
		base.Transport = tr
	}
	// Go's client forwards Authorization on a redirect to the same host
	// name, any port: following one from the gateway would hand the fleet
	// key to whatever listens there. A 3xx is an error instead.
	gw := base
	gw.CheckRedirect = noRedirect
	a.client = &gw
	dl := base
	dl.CheckRedirect = downloadRedirect
	dl.Jar = nil // a download sends no cookie
	a.download = &dl
	ltr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	a.own = append(a.own, ltr)
	a.local = &http.Client{Transport: ltr, CheckRedirect: noRedirect}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		a.log.Warn("the gateway URL is plain http: the fleet key and vLLM API keys cross the network unencrypted", "server", a.server)
	}
	return a, nil
}

var errUnsupportedOS = errors.New("agent: runs on Linux only")

// noRedirect makes a 3xx the answer: the caller sees the status, and no
// request (or header of it) goes to the Location.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Run serves the box until ctx is cancelled, then stops every vLLM
// (SIGTERM, SIGKILL after StopGrace) and returns nil. It returns an error
// only when it cannot start (the state directory cannot be created).
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	if err := os.MkdirAll(a.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("agent: state directory: %w", err)
	}
	if err := os.MkdirAll(a.cfg.ModelsDir, 0o755); err != nil { //nolint:gosec // G301: vLLM may run as another user and must read the weights
		return fmt.Errorf("agent: models directory: %w", err)
	}
	defer a.shutdown()

	// Serve from the state file first: the gateway may be down.
	var desired []fleetapi.Assignment
	haveDesired := false
	st, err := loadState(a.cfg.StateDir)
	if err != nil {
		a.log.Error("state file unreadable; starting without it", "error", err)
	}
	for id, as := range st.Applied {
		a.applied[id] = as
	}
	if st.Config != nil {
		a.config = st.Config
		desired, haveDesired = startupAssignments(st), true
		a.log.Info("starting the assignments of the state file", "assignments", len(desired))
		a.reconcile(ctx, desired)
	}
	lastReconcile := time.Now()

	retry := a.retryMin
	failing := false
	for {
		cfg, err := a.fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		switch {
		case err == nil:
			if failing {
				a.log.Info("gateway reachable again")
			}
			failing, retry = false, a.retryMin
			a.config = cfg
			desired, haveDesired = cfg.Assignments, true
			hw := a.reconcile(ctx, desired)
			lastReconcile = time.Now()
			a.report(ctx, desired, hw)
			wait = jitter(a.cfg.Interval)
		case errors.Is(err, errUnauthorized):
			failing = true
			a.log.Error("fleet key refused by the gateway; check ROLTER_FLEET_KEY", "server", a.server, "retry_in", a.cfg.Interval)
			wait = jitter(a.cfg.Interval)
		default:
			failing = true
			wait = retry/2 + rand.N(retry/2+1)
			retry = min(retry*2, a.cfg.Interval)
			a.log.Warn("config fetch failed; serving the last known assignments", "error", err, "retry_in", wait.Round(time.Millisecond))
		}
		if err != nil && haveDesired && time.Since(lastReconcile) >= a.cfg.Interval {
			// Retry what failed to start (and keep the set as it was)
			// while the gateway cannot be reached.
			a.reconcile(ctx, desired)
			lastReconcile = time.Now()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// startupAssignments is what a starting agent runs from its state: the
// stored configuration, except that a host whose new revision was never
// applied (and may not be applied on its own) runs what it ran before.
func startupAssignments(st state) []fleetapi.Assignment {
	out := make([]fleetapi.Assignment, 0, len(st.Config.Assignments))
	for _, as := range st.Config.Assignments {
		if prev, ok := st.Applied[as.HostID]; ok && prev.Revision != revisionOf(as) && !as.Apply && !as.AutoApply {
			as = prev
		}
		out = append(out, as)
	}
	return out
}

// jitter spreads d by ±10% so that a fleet does not fetch in step.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

func (a *Agent) shutdown() {
	var wg sync.WaitGroup
	for _, c := range a.children {
		wg.Go(c.stop)
	}
	wg.Wait()
	a.saveState() // applied is kept: the next start runs the same
	for _, tr := range a.own {
		tr.CloseIdleConnections()
	}
	if a.cfg.HTTPClient != nil {
		a.cfg.HTTPClient.CloseIdleConnections()
	}
	a.log.Info("agent stopped")
}

func (a *Agent) saveState() {
	if err := a.state.write(state{Config: a.config, Applied: a.applied}); err != nil {
		a.log.Error("cannot write the state file", "error", err)
	}
}

func revisionOf(as fleetapi.Assignment) string {
	if as.Revision != "" {
		return as.Revision
	}
	return fleetapi.Revision(as)
}

// reconcile makes the running set match desired and returns the hardware
// it saw.
func (a *Agent) reconcile(ctx context.Context, desired []fleetapi.Assignment) hardware {
	hw := discoverHardware(ctx, a.cfg.NvidiaSMI, a.cfg.ModelsDir)
	if !hw.SMIFound && !a.smiWarned {
		a.smiWarned = true
		a.log.Warn("nvidia-smi not found: no GPU discovered, VRAM fit checks are skipped", "nvidia_smi", a.cfg.NvidiaSMI)
	}
	if msg := errString(hw.GPUErr); msg != a.lastGPUErr {
		a.lastGPUErr = msg
		if msg != "" {
			a.log.Error("cannot discover GPUs", "error", msg)
		}
	}

	want := map[int64]bool{}
	for _, as := range desired {
		want[as.HostID] = true
	}
	// Retired hosts first: they may free a port a new host uses.
	for id, c := range a.children {
		if !want[id] {
			c.log.Info("host no longer assigned to this box; stopping its vLLM")
			c.stop()
			delete(a.children, id)
			delete(a.applied, id)
		}
	}
	for _, m := range []map[int64]string{a.errs, a.logged, a.pending} {
		for id := range m {
			if !want[id] {
				delete(m, id)
			}
		}
	}
	for id := range a.applied {
		if !want[id] && a.children[id] == nil {
			delete(a.applied, id)
		}
	}

	ports := map[int]int64{}
	seen := map[int64]bool{}
	for _, as := range desired {
		if ctx.Err() != nil {
			break
		}
		as.Revision = revisionOf(as)
		delete(a.errs, as.HostID)
		if seen[as.HostID] {
			continue // a duplicate entry; the first one counts
		}
		seen[as.HostID] = true
		if other, dup := ports[as.Port]; dup {
			a.refuse(as, fmt.Errorf("port %d is also assigned to host %d", as.Port, other))
			continue
		}
		ports[as.Port] = as.HostID
		a.reconcileOne(ctx, as, hw)
	}
	a.saveState()
	return hw
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (a *Agent) reconcileOne(ctx context.Context, as fleetapi.Assignment, hw hardware) {
	id := as.HostID
	c := a.children[id]
	pid := 0
	if c != nil {
		pid, _ = c.running()
		if c.a.Revision == as.Revision {
			delete(a.pending, id)
			delete(a.logged, id)
			return
		}
		if pid != 0 && !as.Apply && !as.AutoApply {
			if a.pending[id] != as.Revision {
				a.pending[id] = as.Revision
				a.log.Info("new revision waits for apply; vLLM keeps running the applied one",
					"host_id", id, "running", c.a.Revision, "new", as.Revision)
			}
			return
		}
	}
	delete(a.pending, id)

	l, err := a.prepare(ctx, as, hw)
	if err != nil {
		if pid != 0 {
			err = fmt.Errorf("revision %s not applied (still running %s): %w", as.Revision, c.a.Revision, err)
		}
		a.refuse(as, err)
		return
	}
	if c != nil {
		a.log.Info("applying new revision: restarting vLLM", "host_id", id, "from", c.a.Revision, "to", as.Revision)
		c.stop()
		delete(a.children, id)
		delete(a.applied, id)
	}
	nc := &child{
		a:          as,
		argv:       l.argv,
		env:        l.env,
		logPath:    filepath.Join(a.cfg.StateDir, fmt.Sprintf("vllm-%d.log", id)),
		grace:      a.cfg.StopGrace,
		log:        a.log.With("host_id", id, "route", as.ModelName, "port", as.Port, "revision", as.Revision),
		restartMin: a.restartMin,
		restartMax: a.restartMax,
	}
	if err := nc.start(); err != nil {
		a.refuse(as, err)
		return
	}
	a.children[id] = nc
	a.applied[id] = as
	delete(a.logged, id)
}

// refuse records why a host's assignment does not run, and logs it when
// the reason changes.
func (a *Agent) refuse(as fleetapi.Assignment, err error) {
	msg := err.Error()
	a.errs[as.HostID] = msg
	if a.logged[as.HostID] != msg {
		a.logged[as.HostID] = msg
		model := ""
		if as.Recipe.VLLM != nil {
			model = as.Recipe.VLLM.Model
		}
		a.log.Error("refusing assignment", "host_id", as.HostID, "route", as.ModelName, "model", model, "revision", as.Revision, "reason", msg)
	}
}

// launch is a prepared vLLM command line.
type launch struct {
	argv []string // holds the API key
	env  []string
}

// prepare validates as, locates its weights, checks the fit, downloads
// what is missing and builds the command line.
func (a *Agent) prepare(ctx context.Context, as fleetapi.Assignment, hw hardware) (launch, error) {
	v := as.Recipe.VLLM
	switch {
	case v == nil:
		return launch{}, errors.New("the recipe has no vllm block")
	case v.Model == "":
		return launch{}, errors.New("the recipe has no model")
	case as.Port < 1 || as.Port > 65535:
		return launch{}, fmt.Errorf("invalid port %d", as.Port)
	case as.APIKey == "":
		return launch{}, errors.New("the assignment has no api_key; vLLM would accept any caller")
	}
	for _, f := range []string{"--port", "--api-key"} {
		if _, ok := fleetapi.FlagValue(v.Args, f); ok {
			return launch{}, fmt.Errorf("recipe args must not set %s: the assignment sets it", f)
		}
	}
	w, err := locateWeights(v, a.cfg.ModelsDir, a.download)
	if err != nil {
		return launch{}, err
	}
	if err := checkFit(v, hw, w.Present); err != nil {
		return launch{}, err
	}
	model := w.Model
	if w.download != nil {
		u, _ := url.Parse(v.Source.URL)
		a.log.Info("downloading weights", "host_id", as.HostID, "url", redactURL(u), "models_dir", a.cfg.ModelsDir)
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, downloadTimeout)
		model, err = w.download(dctx)
		cancel()
		if err != nil {
			return launch{}, err
		}
		a.log.Info("weights downloaded", "host_id", as.HostID, "path", model, "took", time.Since(start).Round(time.Millisecond))
	}

	// The API key goes to vLLM as VLLM_API_KEY, which it reads like
	// --api-key: in argv, every local user could read it with ps.
	argv := append(slices.Clone(a.cfg.Command), "serve", model, "--port", strconv.Itoa(as.Port))
	argv = append(argv, v.Args...)
	if model != v.Model {
		if _, ok := fleetapi.FlagValue(v.Args, "--served-model-name"); !ok {
			argv = append(argv, "--served-model-name", v.ServedName())
		}
	}
	if w.Revision != "" {
		if _, ok := fleetapi.FlagValue(v.Args, "--revision"); !ok {
			argv = append(argv, "--revision", w.Revision)
		}
	}
	return launch{argv: argv, env: a.childEnv(append(slices.Clone(w.Env), "VLLM_API_KEY="+as.APIKey))}, nil
}

// childEnv is the agent's environment for vLLM, without the fleet key,
// plus extra.
func (a *Agent) childEnv(extra []string) []string {
	key := a.cfg.FleetKey.Reveal()
	var env []string
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		// An inherited VLLM_API_KEY would be a second, foreign key.
		if name == "ROLTER_FLEET_KEY" || name == "VLLM_API_KEY" || val == key {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

var errUnauthorized = errors.New("fleet key refused")

// fetch gets the box's configuration.
func (a *Agent) fetch(ctx context.Context) (*fleetapi.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.server+fleetapi.ConfigPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.FleetKey.Reveal())
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, errUnauthorized
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("GET %s: %s: redirects are not followed (the fleet key goes to the gateway only); set --server to the address it redirects to", fleetapi.ConfigPath, resp.Status)
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("GET %s: %s", fleetapi.ConfigPath, resp.Status)
	}
	var cfg fleetapi.Config
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxConfigBody)).Decode(&cfg); err != nil {
		return nil, fmt.Errorf("GET %s: malformed body: %w", fleetapi.ConfigPath, err)
	}
	return &cfg, nil
}

// report posts what runs and what the box sees.
func (a *Agent) report(ctx context.Context, desired []fleetapi.Assignment, hw hardware) {
	r := fleetapi.Report{Applied: make([]fleetapi.Applied, 0, len(desired)), Discovered: hw.discovered()}
	for _, as := range desired {
		ap := fleetapi.Applied{HostID: as.HostID}
		var errs []string
		if c := a.children[as.HostID]; c != nil {
			if pid, why := c.running(); pid != 0 {
				ap.Revision = c.a.Revision
				if r.Discovered.VLLMVersion == "" {
					r.Discovered.VLLMVersion = c.probeVersion(ctx, a.local)
				}
			} else {
				errs = append(errs, why)
			}
		}
		if e := a.errs[as.HostID]; e != "" {
			errs = append(errs, e)
		}
		ap.Error = strings.Join(errs, "; ")
		r.Applied = append(r.Applied, ap)
	}
	r.Clip() // within the gateway's bounds, or it refuses the whole report
	body, err := json.Marshal(r)
	if err != nil {
		a.log.Error("encode report", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.server+fleetapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.FleetKey.Reveal())
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("report failed", "error", err)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent:
		a.log.Debug("reported", "applied", len(r.Applied))
	case http.StatusUnauthorized, http.StatusForbidden:
		a.log.Error("fleet key refused by the gateway; check ROLTER_FLEET_KEY", "server", a.server)
	default:
		a.log.Warn("report failed", "status", resp.Status)
	}
}
