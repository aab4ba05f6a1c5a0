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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	// ReportHeartbeat is how often a box whose report has not changed
	// reports anyway: the gateway's liveness interval, after which it
	// writes an unchanged report's reported_at again.
	ReportHeartbeat = time.Minute

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
	// reportEvery is the longest an unchanged report waits (default
	// ReportHeartbeat).
	reportEvery time.Duration
	kvTick      time.Duration // how often a calibrating vLLM's log is read

	started atomic.Bool

	// Owned by Run's goroutine.
	children   map[int64]*child
	applied    map[int64]fleetapi.Assignment // what each child was started from
	config     *fleetapi.Config              // last fetched (or loaded)
	errs       map[int64]string              // why a host's assignment does not run
	logged     map[int64]string              // the refusal last logged per host
	pending    map[int64]string              // revision waiting for apply, logged once
	kvRecords  map[int64]kvRecord            // kv-cache calibrations, kept in the state file
	state      stateWriter
	smiWarned  bool
	lastGPUErr string
	// legacyReports counts down the reports sent without the fields an
	// older gateway refuses.
	legacyReports int
	// sent is the last report the gateway accepted, as encoded, and
	// sentAt when; nil until one was, or after one failed. A report that
	// would say the same is not sent again before reportEvery.
	sent   []byte
	sentAt time.Time
	// diskFree measures the free space at the models directory (tests
	// replace it).
	diskFree func(path string) (uint64, error)

	// Downloads (download.go): jobs by target directory, the job each
	// host waits on (rebuilt every reconcile), a lock per directory held
	// by the job writing it. jobs and wake are shared with the jobs.
	downloads map[string]*downloadJob
	waiting   map[int64]*downloadJob
	dirLocks  map[string]*sync.Mutex
	jobs      sync.WaitGroup
	wake      chan struct{} // a job ended: reconcile now
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
		cfg:         cfg,
		log:         cfg.Log,
		server:      u.String(),
		retryMin:    min(time.Second, cfg.Interval),
		reportEvery: ReportHeartbeat,
		diskFree:    diskFree,
		restartMin:  time.Second,
		restartMax:  time.Minute,
		kvTick:      250 * time.Millisecond,
		kvRecords:   map[int64]kvRecord{},
		children:    map[int64]*child{},
		applied:     map[int64]fleetapi.Assignment{},
		errs:        map[int64]string{},
		logged:      map[int64]string{},
		pending:     map[int64]string{},
		downloads:   map[string]*downloadJob{},
		waiting:     map[int64]*downloadJob{},
		dirLocks:    map[string]*sync.Mutex{},
		wake:        make(chan struct{}, 1),
		state:       stateWriter{path: filepath.Join(cfg.StateDir, stateFile)},
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
	for id, r := range st.KVCache {
		a.kvRecords[id] = r
	}
	if st.Config != nil {
		a.config = st.Config
		desired, haveDesired = startupAssignments(st), true
		a.log.Info("starting the assignments of the state file", "assignments", len(desired))
		a.reconcile(ctx, desired)
	}
	lastReconcile := time.Now()

	retry := a.retryMin
	failing, woken := false, false
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
				a.sent = nil // it may have lost what it knew: report
			}
			failing, retry = false, a.retryMin
			news := !reflect.DeepEqual(a.config, cfg)
			a.config = cfg
			desired, haveDesired = cfg.Assignments, true
			hw := a.reconcile(ctx, desired)
			lastReconcile = time.Now()
			a.report(ctx, desired, hw, news)
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
		if err != nil && haveDesired && (woken || time.Since(lastReconcile) >= a.cfg.Interval) {
			// Retry what failed to start (and keep the set as it was)
			// while the gateway cannot be reached; launch what a
			// download just brought.
			a.reconcile(ctx, desired)
			lastReconcile = time.Now()
		}
		woken = false
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-a.wake: // a download ended: act on it now, not an interval later
			t.Stop()
			woken = true
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
	a.stopDownloads()
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
	if err := a.state.write(state{Config: a.config, Applied: a.applied, KVCache: a.kvRecords}); err != nil {
		a.log.Error("cannot write the state file", "error", err)
	}
}
