// Package bench is rolter's load tool (`rolter bench`, issue 8): it measures
// what rolter adds to a request by running the same load directly at a mock
// upstream and then through rolter, in the same run, on the same machine.
//
// The mock (`rolter mock`, the --demo simulator with no delays) and the
// gateway (`rolter serve`) run as child processes of the bench, so each
// one's CPU time and memory can be read from /proc on its own. On a small
// machine the load generator, the gateway and the mock share the cores, so
// absolute latencies say little; CPU seconds per request and the ratios
// between the two paths, measured in one run, are what hold up. See
// docs/performance.md.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/defaults"
)

// Options configure a run. Zero values take the defaults shown.
type Options struct {
	// Exe is the rolter binary started as mock and gateway (default: the
	// running executable).
	Exe         string
	Duration    time.Duration // measured time per phase (default 5s)
	Warmup      time.Duration // unmeasured lead-in before each phase (default 500ms)
	Conns       int           // connections of the high-concurrency scenarios (default 64)
	Routes      int           // routes in the gateway's catalog, "bench" included (default 10)
	PoolSize    int           // targets of the chat scenarios' route "bench" (default 1; poolsize.go)
	ScaleRoutes []int         // catalogs of the routes scenario (default 10,000 and 100,000)
	Streams     int           // streams of the idle-streams scenario (default 10,000)
	Scenarios   []string      // scenario names, "default" or "all" (default: "default")
	Progress    io.Writer     // a line per finished phase (default: discarded)
	// KeyRPM and KeyTPM set rpm_limit and tpm_limit on the bench's
	// virtual key (0: none), to measure the rate limit check; set them far
	// above the load so that nothing is refused.
	KeyRPM, KeyTPM int
	// Fleet tunes the fleet scenario.
	Fleet FleetOptions
	// Trace runs each core scenario a third time, through a second
	// gateway exporting OpenTelemetry spans to a sink in the bench
	// (trace.go), and reports the CPU per request with tracing off and on.
	Trace bool
}

// keyFields are the bench key's admin API fields.
func (o *Options) keyFields() map[string]any {
	k := map[string]any{"name": "bench"}
	if o.KeyRPM > 0 {
		k["rpm_limit"] = o.KeyRPM
	}
	if o.KeyTPM > 0 {
		k["tpm_limit"] = o.KeyTPM
	}
	return k
}

func (o *Options) defaults() error {
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		o.Exe = exe
	}
	defaults.Set(&o.Duration, 5*time.Second)
	defaults.Set(&o.Warmup, 500*time.Millisecond)
	defaults.Set(&o.Conns, 64)
	defaults.Set(&o.Routes, 10)
	if o.PoolSize == 0 {
		o.PoolSize = 1
	}
	if err := checkPoolSize(o.PoolSize); err != nil {
		return err
	}
	if len(o.ScaleRoutes) == 0 {
		o.ScaleRoutes = []int{10000, 100000}
	}
	defaults.Set(&o.Streams, 10000)
	if len(o.Scenarios) == 0 {
		o.Scenarios = []string{"default"}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	o.Fleet.defaults()
	if o.Fleet.Hosts > maxFleetHosts {
		return fmt.Errorf("--hosts %d: at most %d", o.Fleet.Hosts, maxFleetHosts)
	}
	return nil
}

// settle is how long the bench waits after a phase through rolter before
// reading CPU times: the gateway writes usage records in batches at least
// once a second, and that work belongs to the phase that caused it.
const settle = 1100 * time.Millisecond

// run is the state of one Run.
type run struct {
	opts  Options
	ticks int64 // USER_HZ
	rep   *Report
}

// Run starts the children, runs the selected scenarios and returns the
// report with its targets evaluated.
func Run(ctx context.Context, o Options) (*Report, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("rolter bench reads /proc and runs on Linux only")
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	sel, err := selectScenarios(o.Scenarios, o.Conns)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	b := &run{opts: o, ticks: clockTicks()}
	b.rep = &Report{Machine: machine(b.ticks), Settings: Settings{DurationS: o.Duration.Seconds(), WarmupS: o.Warmup.Seconds(),
		Conns: o.Conns, Routes: o.Routes, PoolSize: o.PoolSize, PeakSincePhase: true}}
	if sel.scale {
		b.rep.Settings.ScaleRoutes = o.ScaleRoutes
	}
	if sel.idle {
		b.rep.Settings.Streams = o.Streams
	}

	if len(sel.core) > 0 || sel.scale {
		mock, mockURL, err := startMock(o.Exe)
		if err != nil {
			return nil, err
		}
		defer mock.stop(5 * time.Second)
		if len(sel.core) > 0 {
			if err := b.runCore(ctx, sel.core, mock, mockURL); err != nil {
				return nil, err
			}
		}
		if sel.scale {
			if err := b.runRoutes(ctx, mock, mockURL); err != nil {
				return nil, err
			}
		}
	}
	if sel.idle {
		if err := b.runIdle(ctx); err != nil {
			return nil, err
		}
	}
	if sel.fleet {
		if err := b.runFleet(ctx); err != nil {
			return nil, err
		}
	}
	if sel.imp {
		if err := b.runImport(ctx); err != nil {
			return nil, err
		}
	}
	b.rep.evaluate(o.Conns)
	b.rep.TookS = time.Since(start).Seconds()
	return b.rep, nil
}

// runCore runs each core scenario directly at the mock, then through the
// floor (a stock reverse proxy), then through one gateway with the
// --routes catalog.
func (b *run) runCore(ctx context.Context, scs []scenario, mock *child, mockURL string) error {
	gw, err := startGateway(ctx, b.opts.Exe, mockURL, b.opts.Routes, b.opts.PoolSize, b.opts.keyFields())
	if err != nil {
		return err
	}
	defer gw.stop()
	fl, flURL, err := startFloor(b.opts.Exe, mockURL)
	if err != nil {
		return err
	}
	defer fl.stop(5 * time.Second)
	type path struct {
		ep endpoint
		gw *child // the process between the bench and the mock, whose CPU the phase reads (the idle gateway for direct)
	}
	paths := []path{{mockEndpoint(mockURL), gw.child}, {floorEndpoint(flURL), fl}, {gw.endpoint(), gw.child}}
	var sink *traceSink
	if b.opts.Trace {
		tgw, s, err := b.startTracedGateway(ctx, mockURL)
		if err != nil {
			return err
		}
		defer s.close()
		defer tgw.stop()
		sink = s
		ep := tgw.endpoint()
		ep.via = traceVia
		paths = append(paths, path{ep, tgw.child})
	}
	// One request each way before any load, so that a broken setup fails
	// with its reason instead of as a table of errors.
	for _, pt := range paths {
		c := newClient(pt.ep, shape{chunks: streamChunks}, 1)
		s := c.do(ctx, time.Now())
		c.close()
		if s.err != "" {
			return fmt.Errorf("smoke request %s: %s", pt.ep.via, s.err)
		}
	}
	for _, sc := range scs {
		for _, pt := range paths {
			spans := 0
			if pt.ep.via == traceVia {
				spans = sink.spans()
			}
			p, err := b.phase(ctx, sc, pt.ep, pt.gw, mock)
			if err != nil {
				return err
			}
			b.rep.add(p)
			if pt.ep.via == traceVia {
				if err := b.rep.addTrace(sc.name, sink.spans()-spans); err != nil {
					return err
				}
			}
		}
		if f, g := b.rep.phase(sc.name, "floor"), b.rep.phase(sc.name, "rolter"); f != nil && g != nil && f.FloorCPU > 0 {
			g.FloorRatio = g.GatewayCPU / f.FloorCPU
		}
	}
	return nil
}

func mockEndpoint(url string) endpoint {
	return endpoint{via: "direct", base: url, model: upstreamName}
}

// floorEndpoint is the floor in front of the mock: the mock's model name,
// no auth.
func floorEndpoint(url string) endpoint {
	return endpoint{via: "floor", base: url, model: upstreamName}
}

func (g *gatewayProc) endpoint() endpoint {
	return endpoint{via: "rolter", base: g.url, auth: "Bearer " + g.key, model: benchRoute}
}

// phase runs one scenario against one endpoint: a warm-up, then the
// measured load, with the processes' CPU times and peak RSS read around it.
// gw is the process between the bench and the mock on ep's path: the
// gateway, or the floor for the floor path (for direct, the idle gateway).
func (b *run) phase(ctx context.Context, sc scenario, ep endpoint, gw, mock *child) (Phase, error) {
	return b.phaseFor(ctx, sc, ep, gw, mock, b.opts.Duration)
}

// phaseFor is phase with a measured time of d.
func (b *run) phaseFor(ctx context.Context, sc scenario, ep endpoint, gw, mock *child, d time.Duration) (Phase, error) {
	// Open-loop load has no fixed connection count; 64 idle connections
	// cover the requests in flight at the rates the scenarios use.
	conns := max(sc.conc, 64)
	c := newClient(ep, shape{stream: sc.stream, chunks: streamChunks}, conns)
	defer c.close()
	load := func(dur time.Duration) ([]sample, int) {
		if sc.rate > 0 {
			return c.openLoop(ctx, sc.rate, dur)
		}
		return c.closedLoop(ctx, sc.conc, dur), 0
	}
	warm, _ := load(b.opts.Warmup)
	for _, ch := range []*child{gw, mock} {
		if !resetPeak(ch.pid()) {
			b.rep.Settings.PeakSincePhase = false
		}
	}
	before, err := b.sampleAll(gw, mock)
	if err != nil {
		return Phase{}, err
	}
	t0 := time.Now()
	samples, dropped := load(d)
	elapsed := time.Since(t0)
	if ctx.Err() != nil {
		return Phase{}, ctx.Err()
	}
	if ep.via != "direct" {
		time.Sleep(settle)
	}
	after, err := b.sampleAll(gw, mock)
	if err != nil {
		return Phase{}, err
	}

	p := Phase{Scenario: sc.name, Via: ep.via, Stream: sc.stream, Concurrency: sc.conc, Rate: sc.rate,
		Requests: len(samples), Dropped: dropped, Seconds: elapsed.Seconds(), warmup: len(warm)}
	lat := make([]time.Duration, 0, len(samples))
	var ttfe []time.Duration
	for _, s := range samples {
		if s.err != "" {
			p.Errors++
			if p.FirstError == "" {
				p.FirstError = s.err
			}
			continue
		}
		lat = append(lat, s.latency)
		if sc.stream {
			ttfe = append(ttfe, s.ttfe)
		}
	}
	ok := len(lat)
	p.ReqPerSec = float64(ok) / elapsed.Seconds()
	p.Latency = distOf(lat)
	if sc.stream {
		d := distOf(ttfe)
		p.TTFE = &d
	}
	perReq := func(i int) float64 {
		if ok == 0 {
			return 0
		}
		return float64(after[i].cpuTicks-before[i].cpuTicks) / float64(b.ticks) * 1e6 / float64(ok)
	}
	p.MockCPU, p.ClientCPU = perReq(1), perReq(2)
	p.MockPeakRSS = after[1].hwm
	gwCPU := "-"
	switch ep.via {
	case "direct":
	case "floor":
		p.FloorCPU, p.FloorPeakRSS = perReq(0), after[0].hwm
		if p.MockCPU > 0 {
			p.CPURatio = p.FloorCPU / p.MockCPU
		}
		gwCPU = fmt.Sprintf("%.1f", p.FloorCPU)
	default: // rolter, rolter+trace
		p.GatewayCPU, p.GatewayPeakRSS = perReq(0), after[0].hwm
		if p.MockCPU > 0 {
			p.CPURatio = p.GatewayCPU / p.MockCPU
		}
		gwCPU = fmt.Sprintf("%.1f", p.GatewayCPU)
	}
	fmt.Fprintf(b.opts.Progress, "%-12s %-6s %7.0f req/s  p50 %.3f ms  proxy %s µs/req  mock %.1f µs/req  errors %d\n",
		p.Scenario, p.Via, p.ReqPerSec, p.Latency.P50, gwCPU, p.MockCPU, p.Errors)
	return p, nil
}

// sampleAll reads the gateway, the mock and the bench itself, in that
// order.
func (b *run) sampleAll(gw, mock *child) ([3]procSample, error) {
	var out [3]procSample
	for i, pid := range []int{gw.pid(), mock.pid(), 0} {
		s, err := sampleProc(pid)
		if err != nil {
			return out, err
		}
		out[i] = s
	}
	return out, nil
}

// machine describes the host.
func machine(ticks int64) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), ClockTicks: ticks}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalMB = parseStatusKB(b, "MemTotal") / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			m.Commit = rev + dirty
		}
	}
	if m.Commit == "" {
		m.Commit = gitCommit()
	}
	return m
}

// gitCommit names the checkout the bench runs in, for `go run`, which does
// not stamp VCS information into the binary. It returns "" outside a git
// checkout or without git.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "+dirty"
	}
	return rev
}
