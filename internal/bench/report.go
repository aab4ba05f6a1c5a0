package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// Report is the result of one run; it is what --json writes.
type Report struct {
	Machine  Machine        `json:"machine"`
	Settings Settings       `json:"settings"`
	Phases   []Phase        `json:"phases"`
	Routes   []RoutesResult `json:"routes,omitempty"`
	Idle     *IdleResult    `json:"idle_streams,omitempty"`
	Fleet    *FleetResult   `json:"fleet,omitempty"`
	Import   *ImportResult  `json:"import,omitempty"`
	Tracing  []TraceResult  `json:"tracing,omitempty"` // --trace (trace.go)
	Targets  []TargetResult `json:"targets"`
	Notes    []string       `json:"notes,omitempty"`
	TookS    float64        `json:"took_s"`
}

// Machine describes where the numbers came from.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	Commit     string `json:"commit,omitempty"`
	LoadAvg    string `json:"loadavg_at_start"` // /proc/loadavg: 1, 5, 15 minutes
	ClockTicks int64  `json:"clock_ticks"`      // USER_HZ, the unit of /proc CPU times
}

// Settings are the flags the run used.
type Settings struct {
	DurationS   float64 `json:"duration_s"`
	WarmupS     float64 `json:"warmup_s"`
	Conns       int     `json:"conns"`
	Routes      int     `json:"routes"`
	PoolSize    int     `json:"pool_size,omitempty"` // targets of the chat scenarios' route (--pool-size)
	ScaleRoutes []int   `json:"scale_routes,omitempty"`
	Streams     int     `json:"streams,omitempty"`
	// PeakSincePhase is false where the kernel refused to reset VmHWM:
	// peaks are then since process start.
	PeakSincePhase bool `json:"peak_rss_per_phase"`
}

// Phase is one scenario run against one endpoint.
type Phase struct {
	Scenario    string  `json:"scenario"`
	Via         string  `json:"via"` // "direct" (client → mock), "floor" (client → floor → mock) or "rolter" (client → rolter → mock)
	Stream      bool    `json:"stream"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Dropped     int     `json:"dropped,omitempty"` // open loop: due while maxInFlight were running
	Seconds     float64 `json:"seconds"`
	ReqPerSec   float64 `json:"req_per_s"`
	Latency     dist    `json:"latency"`
	TTFE        *dist   `json:"time_to_first_event,omitempty"`
	// CPU time per completed request, in microseconds: utime+stime deltas
	// of each process over the phase. The gateway's is omitted for direct
	// phases, where it serves nothing.
	GatewayCPU float64 `json:"gateway_cpu_us_per_req,omitempty"`
	MockCPU    float64 `json:"mock_cpu_us_per_req"`
	ClientCPU  float64 `json:"client_cpu_us_per_req"`
	// CPURatio is the proxy's CPU per request ÷ the mock's: the gateway's
	// on rolter rows, the floor's on floor rows.
	CPURatio float64 `json:"gateway_to_mock_cpu,omitempty"`
	// FloorCPU is the floor's CPU per request (`rolter floor`, a stock
	// httputil.ReverseProxy), on floor rows.
	FloorCPU float64 `json:"floor_cpu_us_per_req,omitempty"`
	// FloorRatio is, on rolter rows, GatewayCPU ÷ the same scenario's
	// FloorCPU, from the same run: what the gateway costs against a bare
	// reverse proxy doing no auth and no body work.
	FloorRatio float64 `json:"gateway_to_floor_cpu,omitempty"`
	// Peak RSS (VmHWM) during the phase, bytes.
	GatewayPeakRSS int64 `json:"gateway_peak_rss_bytes,omitempty"`
	FloorPeakRSS   int64 `json:"floor_peak_rss_bytes,omitempty"`
	MockPeakRSS    int64 `json:"mock_peak_rss_bytes"`
	warmup         int   // requests sent in the warm-up
}

// RoutesResult is the routes scenario at one catalog size.
type RoutesResult struct {
	Routes    int     `json:"routes"`
	Providers int     `json:"providers"`
	SeedS     float64 `json:"seed_s"`  // writing the catalog into the store
	ReadyS    float64 `json:"ready_s"` // `rolter serve` start to /readyz: open, load, first snapshot
	// Admin writes: each commits and rebuilds the snapshot before it
	// answers. CreateRoute is the POST of the bench route, right after
	// start-up (the first round of health probes runs beside it); Rebuild
	// the PATCHes of it after the load phase, and Create the POSTs of
	// more routes after those.
	CreateRouteMS float64 `json:"create_route_ms"`
	RebuildMS     dist    `json:"rebuild_ms"`
	CreateMS      dist    `json:"create_ms"`
	Phase         Phase   `json:"phase"` // chat-c1 through rolter
	// IdleCPU is the gateway's CPU use with no traffic, in cores: the
	// background work its catalog costs (health probes of every provider).
	IdleCPU float64 `json:"gateway_idle_cpu_cores"`
	// NetCPU is Phase.GatewayCPU less IdleCPU's share: the request path's
	// own CPU per request, µs.
	NetCPU float64 `json:"gateway_net_cpu_us_per_req"`
	// CPU per request relative to the smallest catalog of the run, gross
	// and net of background work.
	CPUVsSmallest float64 `json:"cpu_vs_smallest"`
	NetVsSmallest float64 `json:"net_cpu_vs_smallest"`
	RSS           int64   `json:"rss_bytes"`      // VmRSS after the load
	PeakRSS       int64   `json:"peak_rss_bytes"` // VmHWM over the process's life: start, load, rebuilds
}

// IdleResult is the idle-streams scenario.
type IdleResult struct {
	Asked      int     `json:"asked"`
	Open       int     `json:"open"` // streams that got their first event and stayed open
	FirstError string  `json:"first_error,omitempty"`
	RampS      float64 `json:"ramp_s"`
	// RSS per open stream, KiB: (VmRSS with the streams open - before) / open.
	GatewayKiB float64 `json:"gateway_kib_per_stream"`
	MockKiB    float64 `json:"mock_kib_per_stream"`
	// The gateway's Go runtime view (from its /metrics), per stream.
	Goroutines    float64 `json:"gateway_goroutines_per_stream"`
	HeapKiB       float64 `json:"gateway_heap_inuse_kib_per_stream"`
	StackKiB      float64 `json:"gateway_stack_inuse_kib_per_stream"`
	GatewayRSS    int64   `json:"gateway_rss_bytes"` // with the streams open
	GatewayBefore int64   `json:"gateway_rss_before_bytes"`
}

// TargetResult is one of the targets, as measured in this run.
type TargetResult struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  *bool  `json:"met"` // null: not measured (its scenario was not run)
}

func (r *Report) add(p Phase) {
	r.Phases = append(r.Phases, p)
}

// phase finds a phase by scenario and via.
func (r *Report) phase(scenario, via string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Scenario == scenario && r.Phases[i].Via == via {
			return &r.Phases[i]
		}
	}
	return nil
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644) //nolint:gosec // G306: a benchmark report, meant to be shared
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Print writes the human-readable report: machine, phases, scale results,
// targets.
func (r *Report) Print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPUs (%s), %d MB, Linux %s, %s", m.CPUs, m.CPUModel, m.MemTotalMB, m.Kernel, m.Go)
	if m.Commit != "" {
		fmt.Fprintf(w, ", commit %s", m.Commit)
	}
	fmt.Fprintf(w, "\nload average at start: %s; %.0fs per phase after %.1fs warm-up\n", m.LoadAvg, r.Settings.DurationS, r.Settings.WarmupS)
	if r.Settings.PoolSize > 1 {
		fmt.Fprintf(w, "route \"bench\" balances over %d targets (--pool-size)\n", r.Settings.PoolSize)
	}
	fmt.Fprintln(w)

	if len(r.Phases) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tvia\treq/s\tp50 ms\tp90 ms\tp99 ms\tTTFE p50\tTTFE p99\tproxy CPU µs/req\tmock CPU µs/req\tproxy÷mock\tgw÷floor\tproxy peak RSS MB\terrors\t")
		for _, p := range r.Phases {
			ttfe50, ttfe99 := "-", "-"
			if p.TTFE != nil {
				ttfe50, ttfe99 = f3(p.TTFE.P50), f3(p.TTFE.P99)
			}
			gw, ratio, floor, rss := "-", "-", "-", "-"
			switch p.Via {
			case "direct":
			case "floor":
				gw, ratio, rss = f1(p.FloorCPU), fmt.Sprintf("%.2f", p.CPURatio), mb(p.FloorPeakRSS)
			default: // rolter, rolter+trace
				gw, ratio, rss = f1(p.GatewayCPU), fmt.Sprintf("%.2f", p.CPURatio), mb(p.GatewayPeakRSS)
				if p.FloorRatio > 0 {
					floor = fmt.Sprintf("%.2f", p.FloorRatio)
				}
			}
			errs := fmt.Sprint(p.Errors)
			if p.Dropped > 0 {
				errs += fmt.Sprintf(" (+%d dropped)", p.Dropped)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Scenario, p.Via, p.ReqPerSec,
				f3(p.Latency.P50), f3(p.Latency.P90), f3(p.Latency.P99), ttfe50, ttfe99, gw, f1(p.MockCPU), ratio, floor, rss, errs)
		}
		tw.Flush()
		for _, p := range r.Phases {
			if p.FirstError != "" {
				fmt.Fprintf(w, "  %s %s: first error: %s\n", p.Scenario, p.Via, p.FirstError)
			}
		}
		fmt.Fprintln(w)
	}

	if len(r.Routes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "routes\tproviders\tseed s\tready s\tcreate route ms\trebuild ms p50\trebuild ms max\tcreate ms p50\tcreate ms max\tidle CPU cores\treq/s\tp50 ms\tgw CPU µs/req\tvs smallest\tnet µs/req\tnet vs smallest\tRSS MB\tpeak RSS MB\t")
		for _, s := range r.Routes {
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%.0f\t%s\t%s\t%.2f\t%s\t%.2f\t%s\t%s\t\n", s.Routes, s.Providers, s.SeedS, s.ReadyS,
				s.CreateRouteMS, s.RebuildMS.P50, s.RebuildMS.Max, s.CreateMS.P50, s.CreateMS.Max, s.IdleCPU, s.Phase.ReqPerSec, f3(s.Phase.Latency.P50), f1(s.Phase.GatewayCPU),
				s.CPUVsSmallest, f1(s.NetCPU), s.NetVsSmallest, mb(s.RSS), mb(s.PeakRSS))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "idle streams: %d of %d open after %.1fs; gateway %.1f KiB/stream (RSS %s → %s MB; heap %.1f KiB, stacks %.1f KiB, %.1f goroutines per stream); mock %.1f KiB/stream\n",
			i.Open, i.Asked, i.RampS, i.GatewayKiB, mb(i.GatewayBefore), mb(i.GatewayRSS), i.HeapKiB, i.StackKiB, i.Goroutines, i.MockKiB)
		if i.FirstError != "" {
			fmt.Fprintf(w, "  first error: %s\n", i.FirstError)
		}
		fmt.Fprintln(w)
	}
	if f := r.Fleet; f != nil {
		f.print(w)
	}
	if i := r.Import; i != nil {
		fmt.Fprintf(w, "import: %d routes over %d providers (%d entries, %.1f MB file) into an empty SQLite store: %.2f s wall, %.2f s CPU, peak RSS %s MB\n\n",
			i.Routes, i.Providers, i.Entries, i.FileMB, i.WallS, i.CPUS, mb(i.PeakRSS))
	}
	r.printTracing(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\twant\tgot\t")
	for _, t := range r.Targets {
		verdict := "not run"
		if t.Met != nil {
			verdict = map[bool]string{true: "met", false: "NOT MET"}[*t.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Want, t.Got, verdict)
	}
	tw.Flush()
	if !r.Settings.PeakSincePhase {
		fmt.Fprintln(w, "note: the kernel refused to reset VmHWM (clear_refs): peak RSS figures are since process start")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// PrintCompare prints, for every phase in both reports, cur ÷ old for
// throughput, p50 latency, time to first event, the proxy's CPU per
// request (the gateway's, or the floor's on floor rows), proxy ÷ mock CPU
// and gateway ÷ floor CPU: below 1 is better for all but throughput. name
// says where old came from.
func PrintCompare(w io.Writer, name string, old, cur *Report) {
	fmt.Fprintf(w, "\nthis run ÷ %s (commit %s):\n", name, orDash(old.Machine.Commit))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tvia\treq/s\tp50\tTTFE p50\tproxy CPU/req\tproxy÷mock\tgw÷floor\t")
	ratio := func(a, b float64) string {
		if b == 0 || a == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, p := range cur.Phases {
		o := old.phase(p.Scenario, p.Via)
		if o == nil {
			continue
		}
		ttfe := "-"
		if p.TTFE != nil && o.TTFE != nil {
			ttfe = ratio(p.TTFE.P50, o.TTFE.P50)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Scenario, p.Via, ratio(p.ReqPerSec, o.ReqPerSec),
			ratio(p.Latency.P50, o.Latency.P50), ttfe, ratio(p.GatewayCPU+p.FloorCPU, o.GatewayCPU+o.FloorCPU), ratio(p.CPURatio, o.CPURatio),
			ratio(p.FloorRatio, o.FloorRatio))
	}
	tw.Flush()
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f3(v float64) string { return fmt.Sprintf("%.3f", v) }
func mb(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
