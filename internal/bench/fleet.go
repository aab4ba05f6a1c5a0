package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/defaults"
	"github.com/rolter/rolter/internal/demo"
)

// fleetScenario is the fleet scenario's name (issue 23): N fake GPU
// boxes against one gateway.
const fleetScenario = "fleet"

// fleetModel is the model_name of the fleet's hosts: the route the chat
// load of the kill test calls.
const fleetModel = "fleet-bench"

// fleetBatch is how many hosts one create request carries: the admin
// API's cap (admin.MaxHostsPerCreate).
const fleetBatch = 1000

// maxFleetHosts bounds --hosts: each box holds a listener, an agent and
// their connections in the bench process.
const maxFleetHosts = 10000

// FleetOptions tune the fleet scenario; zero values take the defaults.
type FleetOptions struct {
	Hosts int // boxes (default 100)
	// AgentInterval is how often each fake agent polls /vllm/config
	// (default 10s, the issue's).
	AgentInterval time.Duration
	// ProbeInterval is the gateway's --fleet-probe-interval and
	// --probe-interval (default 2s), FailAfter its --fleet-fail-after
	// (default 3): how soon a dead box is noticed and deregistered.
	ProbeInterval time.Duration
	FailAfter     int
	// Steady is how long the steady state is measured (default 2 agent
	// intervals).
	Steady time.Duration
	// Requests and Rate shape the kill test's chat load: Requests at Rate
	// per second (default 3,000 at 100/s), a tenth of the boxes killed
	// after the first third.
	Requests int
	Rate     float64
}

func (o *FleetOptions) defaults() {
	defaults.Set(&o.Hosts, 100)
	defaults.Set(&o.AgentInterval, 10*time.Second)
	defaults.Set(&o.ProbeInterval, 2*time.Second)
	defaults.Set(&o.FailAfter, 3)
	defaults.Set(&o.Steady, 2*o.AgentInterval)
	defaults.Set(&o.Requests, 3000)
	defaults.Set(&o.Rate, 100)
}

// FleetResult is the fleet scenario.
type FleetResult struct {
	Hosts          int     `json:"hosts"`
	AgentIntervalS float64 `json:"agent_interval_s"`
	ProbeIntervalS float64 `json:"probe_interval_s"`
	FailAfter      int     `json:"fail_after"`
	// CreateS is the bulk creation of every host through the admin API;
	// RegisteredS from then until every host is serving.
	CreateS     float64 `json:"create_s"`
	RegisteredS float64 `json:"registered_s"`
	// Config is the agents' /vllm/config round trip at steady state.
	Config           dist   `json:"vllm_config_ms"`
	ConfigRequests   int    `json:"vllm_config_requests"`
	ConfigErrors     int    `json:"vllm_config_errors"`
	ConfigFirstError string `json:"vllm_config_first_error,omitempty"`
	// The gateway at steady state: every box polling, no chat.
	SteadyS      float64 `json:"steady_s"`
	GatewayCores float64 `json:"gateway_cpu_cores"`
	RSS          int64   `json:"gateway_rss_bytes"`
	Goroutines   float64 `json:"gateway_goroutines"`
	FDs          int     `json:"gateway_open_fds"`
	// The kill test: chat through the fleet route while a tenth of the
	// boxes die (at least one). LeaveRoutingS is from the kill until every
	// killed box's provider reads not ready (or is gone), DeregisteredS
	// until every killed host is down; -1 when not seen before the wait
	// ended. Dropped requests (due while maxInFlight were still running)
	// count in Requests and Failed.
	Killed        int     `json:"killed"`
	Requests      int     `json:"requests"`
	Failed        int     `json:"failed"`
	Dropped       int     `json:"dropped"`
	FirstError    string  `json:"first_error,omitempty"`
	LeaveRoutingS float64 `json:"leave_routing_s"`
	DeregisteredS float64 `json:"deregistered_s"`
	// The same, per killed box from its first refusal (the gateway's
	// rolter_upstream_refusals_total moved, or the controller's probe
	// failed), the largest over the killed boxes: what a box costs once
	// something met it dead. Seen every 500 ms, so ±0.5 s. -1: not seen.
	LeaveAfterRefusalS   float64 `json:"leave_routing_after_refusal_s"`
	DeregAfterRefusalS   float64 `json:"deregistered_after_refusal_s"`
	ProbeIntervalsToDown float64 `json:"deregistered_after_refusal_probe_intervals"`
}

// runFleet runs the fleet scenario.
func (b *run) runFleet(ctx context.Context) error {
	o := b.opts.Fleet
	res := &FleetResult{Hosts: o.Hosts, AgentIntervalS: o.AgentInterval.Seconds(), ProbeIntervalS: o.ProbeInterval.Seconds(), FailAfter: o.FailAfter}
	boxes, err := startBoxes(o.Hosts)
	if err != nil {
		return err
	}
	defer stopBoxes(boxes)
	probe := o.ProbeInterval.String()
	gw, err := startGateway(ctx, b.opts.Exe, "http://"+boxes[0].addr(), 1, 1, b.opts.keyFields(),
		"--fleet-probe-interval", probe, "--probe-interval", probe, "--fleet-fail-after", strconv.Itoa(o.FailAfter))
	if err != nil {
		return err
	}
	defer gw.stop()
	base := "/admin/v1/orgs/" + orgName
	var fk struct{ Secret string }
	if _, err := gw.adminCall(ctx, http.MethodPost, base+"/fleet-keys", map[string]any{"name": "bench"}, &fk); err != nil {
		return err
	}

	// Create every host, fleetBatch per request.
	byID := map[int64]*box{}
	ids := make([]int64, 0, len(boxes)) // by position
	t0 := time.Now()
	for start := 0; start < len(boxes); start += fleetBatch {
		part := boxes[start:min(start+fleetBatch, len(boxes))]
		hosts := make([]map[string]any, len(part))
		for i, bx := range part {
			hosts[i] = map[string]any{"ip": bx.ip.String(), "port": bx.port, "model_name": fleetModel,
				"recipe": map[string]any{"vllm": map[string]any{"model": demo.ModelID, "source": map[string]any{"kind": "hf"},
					"vram_gb": 16, "disk_gb": 18, "args": []string{"--max-model-len", "8192"}}}}
		}
		var out struct{ Hosts []struct{ ID int64 } }
		if _, err := gw.adminCall(ctx, http.MethodPost, base+"/hosts", map[string]any{"hosts": hosts}, &out); err != nil {
			return err
		}
		if len(out.Hosts) != len(part) {
			return fmt.Errorf("created %d hosts of %d", len(out.Hosts), len(part))
		}
		for i, h := range out.Hosts {
			byID[h.ID] = part[i]
			ids = append(ids, h.ID)
		}
	}
	res.CreateS = time.Since(t0).Seconds()
	fmt.Fprintf(b.opts.Progress, "fleet        %d hosts created in %.2fs\n", o.Hosts, res.CreateS)

	actx, stopAgents := context.WithCancel(ctx)
	var agents sync.WaitGroup
	defer func() { stopAgents(); agents.Wait() }()
	times := &configTimes{}
	for _, bx := range boxes {
		agents.Go(func() { bx.runAgent(actx, gw.url, fk.Secret, o.AgentInterval, times) })
	}

	t0 = time.Now()
	if err := waitFor(ctx, 5*time.Minute+time.Duration(o.Hosts)*100*time.Millisecond, func() (bool, error) {
		hs, err := fleetHosts(ctx, gw)
		return err == nil && countState(hs, "serving", nil) == o.Hosts, err
	}); err != nil {
		return fmt.Errorf("waiting for every host to serve: %w", err)
	}
	res.RegisteredS = time.Since(t0).Seconds()
	fmt.Fprintf(b.opts.Progress, "fleet        all serving %.1fs later\n", res.RegisteredS)

	// Steady state: every box polling, the controller probing.
	times.reset()
	before, err := sampleProc(gw.pid())
	if err != nil {
		return err
	}
	t0 = time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.Steady):
	}
	after, err := sampleProc(gw.pid())
	if err != nil {
		return err
	}
	res.SteadyS = time.Since(t0).Seconds()
	res.GatewayCores = float64(after.cpuTicks-before.cpuTicks) / float64(b.ticks) / res.SteadyS
	res.RSS = after.rss
	res.Goroutines = runtimeMetrics(ctx, gw.url)["go_goroutines"]
	if fds, err := os.ReadDir("/proc/" + strconv.Itoa(gw.pid()) + "/fd"); err == nil {
		res.FDs = len(fds)
	}
	ct, cerr, cfirst := times.reset()
	res.Config, res.ConfigRequests, res.ConfigErrors, res.ConfigFirstError = distOf(ct), len(ct), cerr, cfirst
	fmt.Fprintf(b.opts.Progress, "fleet        steady: %.3f cores, /vllm/config p99 %.1f ms\n", res.GatewayCores, res.Config.P99)

	if err := b.fleetKill(ctx, gw, byID, ids, res); err != nil {
		return err
	}
	b.rep.Fleet = res
	return nil
}

// fleetVictims are the positions of the boxes the kill test kills: every
// tenth box (the 10th, the 20th, ...), and the last one when there are
// fewer than ten, so that the test always kills one.
func fleetVictims(n int) []int {
	var out []int
	for i := 9; i < n; i += 10 {
		out = append(out, i)
	}
	if len(out) == 0 && n > 0 {
		out = append(out, n-1)
	}
	return out
}

// fleetKill runs the kill test: chat at o.Rate through the fleet route,
// a tenth of the boxes (fleetVictims; ids are the hosts by position)
// killed after the first third of the requests.
func (b *run) fleetKill(ctx context.Context, gw *gatewayProc, byID map[int64]*box, ids []int64, res *FleetResult) error {
	o := b.opts.Fleet
	killed := map[int64]bool{}
	for _, i := range fleetVictims(len(ids)) {
		killed[ids[i]] = true
	}
	if len(killed) == 0 {
		return errors.New("fleet kill test: no box to kill")
	}
	res.Killed = len(killed)
	c := newClient(endpoint{via: "rolter", base: gw.url, auth: "Bearer " + gw.key, model: fleetModel}, shape{}, 64)
	defer c.close()
	dur := time.Duration(float64(o.Requests) / o.Rate * float64(time.Second))
	var (
		samples []sample
		dropped int
	)
	loadDone := make(chan struct{})
	go func() {
		samples, dropped = c.openLoop(ctx, o.Rate, dur)
		close(loadDone)
	}()
	select {
	case <-ctx.Done():
		<-loadDone
		return ctx.Err()
	case <-time.After(dur / 3):
	}
	killAt := time.Now()
	for id := range killed {
		byID[id].kill()
	}
	res.LeaveRoutingS, res.DeregisteredS = -1, -1
	w := newKillWatch(killed)
	wait := 30*time.Second + time.Duration(o.FailAfter+2)*o.ProbeInterval
	_ = waitFor(ctx, wait, func() (bool, error) {
		refusing := refusalCounts(ctx, gw.url)
		hs, err := fleetHosts(ctx, gw)
		if err != nil {
			return false, err
		}
		out, err := fleetProvidersOut(ctx, gw, hs, killed)
		if err != nil {
			return false, err
		}
		// A poll of a hundred providers takes a while on a loaded
		// machine: what it saw is timed at its end, the later bound.
		now := time.Now()
		w.observe(now, hs, refusing, out)
		if res.LeaveRoutingS < 0 && len(out) == len(killed) {
			res.LeaveRoutingS = now.Sub(killAt).Seconds()
		}
		if res.DeregisteredS < 0 && countState(hs, "down", killed) == len(killed) {
			res.DeregisteredS = now.Sub(killAt).Seconds()
		}
		return res.LeaveRoutingS >= 0 && res.DeregisteredS >= 0, nil
	})
	res.LeaveAfterRefusalS, res.DeregAfterRefusalS = w.worst()
	if res.DeregAfterRefusalS >= 0 {
		res.ProbeIntervalsToDown = res.DeregAfterRefusalS / o.ProbeInterval.Seconds()
	}
	<-loadDone
	// A dropped request was due and never sent: the load fell behind, a
	// failure of the run the report must not hide.
	res.Requests, res.Dropped, res.Failed = len(samples)+dropped, dropped, dropped
	for _, s := range samples {
		if s.err != "" {
			res.Failed++
			if res.FirstError == "" {
				res.FirstError = s.err
			}
		}
	}
	if res.FirstError == "" && dropped > 0 {
		res.FirstError = fmt.Sprintf("%d requests dropped: due while %d were still in flight", dropped, maxInFlight)
	}
	fmt.Fprintf(b.opts.Progress, "fleet        kill %d: %d of %d requests failed (%d dropped); out of routing %.1fs, deregistered %.1fs\n",
		res.Killed, res.Failed, res.Requests, res.Dropped, res.LeaveRoutingS, res.DeregisteredS)
	return nil
}

func (b *box) addr() string { return b.ip.String() + ":" + strconv.Itoa(b.port) }

// waitFor polls cond every 500ms until it holds, the limit passes (an
// error) or ctx ends.
func waitFor(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("not within %s", limit), last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type fleetHost struct {
	ID       int64  `json:"id"`
	State    string `json:"state"`
	Provider string `json:"provider"`
	Probe    *struct {
		ConsecutiveFailures int `json:"consecutive_failures"`
	} `json:"probe"`
}

// fleetHosts lists every host of the bench's org.
func fleetHosts(ctx context.Context, gw *gatewayProc) ([]fleetHost, error) {
	var all []fleetHost
	cursor := ""
	for {
		var page struct {
			Data       []fleetHost `json:"data"`
			NextCursor string      `json:"next_cursor"`
		}
		path := "/admin/v1/orgs/" + orgName + "/hosts?limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if _, err := gw.adminCall(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if cursor = page.NextCursor; cursor == "" {
			return all, nil
		}
	}
}

// countState counts the hosts in state, among only when not nil.
func countState(hs []fleetHost, state string, only map[int64]bool) int {
	n := 0
	for _, h := range hs {
		if h.State == state && (only == nil || only[h.ID]) {
			n++
		}
	}
	return n
}

// fleetProvidersOut returns the killed hosts whose provider is out of
// routing: not ready, gone, or deregistered (down).
func fleetProvidersOut(ctx context.Context, gw *gatewayProc, hs []fleetHost, killed map[int64]bool) (map[int64]bool, error) {
	out := map[int64]bool{}
	for _, h := range hs {
		if !killed[h.ID] {
			continue
		}
		if h.Provider == "" || h.State != "serving" {
			out[h.ID] = true
			continue
		}
		var pv struct {
			DeletedAt *time.Time `json:"deleted_at"`
			Readiness *struct {
				State string `json:"state"`
			} `json:"readiness"`
		}
		if _, err := gw.adminCall(ctx, http.MethodGet, "/admin/v1/orgs/"+orgName+"/providers/"+h.Provider, nil, &pv); err != nil {
			var se *adminStatusError
			if errors.As(err, &se) && se.status == http.StatusNotFound {
				out[h.ID] = true // gone
				continue
			}
			return nil, err
		}
		if pv.DeletedAt != nil || (pv.Readiness != nil && pv.Readiness.State == "not_ready") {
			out[h.ID] = true
		}
	}
	return out, nil
}

// killWatch times, per killed host, its first refusal, its leaving
// routing and its deregistration, as seen by polling.
type killWatch struct {
	refused, out, down map[int64]time.Time
	killed             map[int64]bool
}

func newKillWatch(killed map[int64]bool) *killWatch {
	return &killWatch{refused: map[int64]time.Time{}, out: map[int64]time.Time{}, down: map[int64]time.Time{}, killed: killed}
}

// observe records one poll at now: the hosts, the gateway's refusal
// counts by provider slug, and the hosts out of routing. Something met a
// box dead once the gateway counted a refusal of its provider or the
// controller counted a failed probe (or it is out already).
func (w *killWatch) observe(now time.Time, hs []fleetHost, refusing map[string]float64, out map[int64]bool) {
	first := func(m map[int64]time.Time, id int64) {
		if _, ok := m[id]; !ok {
			m[id] = now
		}
	}
	for _, h := range hs {
		if !w.killed[h.ID] {
			continue
		}
		if refusing[h.Provider] > 0 || (h.Probe != nil && h.Probe.ConsecutiveFailures > 0) || out[h.ID] || h.State == "down" {
			first(w.refused, h.ID)
		}
		if out[h.ID] {
			first(w.out, h.ID)
		}
		if h.State == "down" {
			first(w.down, h.ID)
		}
	}
}

// worst is the longest time from a killed box's first refusal to its
// leaving routing, and to its deregistration; -1 when some box was not
// seen doing it.
func (w *killWatch) worst() (leave, dereg float64) {
	span := func(to map[int64]time.Time) float64 {
		worst := 0.0
		for id := range w.killed {
			at, ok := to[id]
			from, seen := w.refused[id]
			if !ok || !seen {
				return -1
			}
			worst = max(worst, at.Sub(from).Seconds())
		}
		return worst
	}
	return span(w.out), span(w.down)
}

// refusalCounts reads the gateway's rolter_upstream_refusals_total by
// provider slug; empty when /metrics cannot be read.
func refusalCounts(ctx context.Context, base string) map[string]float64 {
	out := map[string]float64{}
	eachMetric(ctx, base, func(line string) {
		if !strings.HasPrefix(line, "rolter_upstream_refusals_total{") {
			return
		}
		_, rest, _ := strings.Cut(line, `provider="`)
		slug, rest, ok := strings.Cut(rest, `"`)
		if !ok {
			return
		}
		_, value, _ := strings.Cut(rest, "} ")
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[slug] = v
		}
	})
	return out
}

func (f *FleetResult) print(w io.Writer) {
	fmt.Fprintf(w, "fleet: %d hosts (agents poll every %s; --fleet-probe-interval %s, --fleet-fail-after %d)\n",
		f.Hosts, time.Duration(f.AgentIntervalS*float64(time.Second)), time.Duration(f.ProbeIntervalS*float64(time.Second)), f.FailAfter)
	fmt.Fprintf(w, "  create all hosts (bulk) %.2fs; all serving %.1fs later\n", f.CreateS, f.RegisteredS)
	fmt.Fprintf(w, "  steady over %.0fs: gateway %.3f cores, RSS %s MB, %.0f goroutines, %d open fds; /vllm/config p50 %.1f ms p99 %.1f ms (%d polls, %d errors)\n",
		f.SteadyS, f.GatewayCores, mb(f.RSS), f.Goroutines, f.FDs, f.Config.P50, f.Config.P99, f.ConfigRequests, f.ConfigErrors)
	if f.ConfigFirstError != "" {
		fmt.Fprintf(w, "  first /vllm/config error: %s\n", f.ConfigFirstError)
	}
	fmt.Fprintf(w, "  kill %d boxes under chat load: %d of %d requests failed (%d dropped); out of routing after %s, deregistered after %s\n",
		f.Killed, f.Failed, f.Requests, f.Dropped, seconds(f.LeaveRoutingS), seconds(f.DeregisteredS))
	fmt.Fprintf(w, "  from each box's first refusal (worst box): out of routing after %s, deregistered after %s (%.2f probe intervals)\n",
		seconds(f.LeaveAfterRefusalS), seconds(f.DeregAfterRefusalS), f.ProbeIntervalsToDown)
	if f.FirstError != "" {
		fmt.Fprintf(w, "  first error: %s\n", f.FirstError)
	}
	fmt.Fprintln(w)
}

// seconds shows a duration in seconds, "not seen" when negative.
func seconds(s float64) string {
	if s < 0 {
		return "not seen"
	}
	return fmt.Sprintf("%.1fs", s)
}
