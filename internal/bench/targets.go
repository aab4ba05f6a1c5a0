package bench

import (
	"fmt"
	"math"
)

// The targets (issue 8). They are checked here, in the benchmark,
// and never as timed unit tests.
const (
	maxChatCPURatio   = 2.5  // gateway CPU ÷ mock CPU, non-streamed
	maxStreamCPURatio = 2.0  // gateway CPU ÷ mock CPU, streamed, 20 chunks
	maxAddedP50MS     = 0.1  // added p50 latency, non-streamed, concurrency 1
	maxAddedTTFEMS    = 0.15 // added p50 time to first event, concurrency 1
	minThroughputPct  = 35.0 // rolter ÷ direct throughput at --conns connections
	maxCatalogDrift   = 0.10 // CPU per request, largest vs smallest catalog
	// One admin write to visible (the PATCH round trip, p50), issue 21.
	maxVisible10kMS  = 20.0
	maxVisible100kMS = 100.0
	maxRSS10kMB      = 64.0
	maxRSS100kMB     = 256.0 // issue 21
	maxReady100kS    = 2.0   // issue 21: `rolter serve` start to /readyz
	maxStreamKiB     = 32.0  // issue 21
	maxImportS       = 10.0  // issue 21: rolter import of 10,000 routes over 1,000 providers
	// Gateway CPU ÷ floor CPU per request (issue 21): the floor is a stock
	// httputil.ReverseProxy with the same transport (`rolter floor`).
	maxChatFloorRatio   = 0.5
	maxStreamFloorRatio = 0.8
)

// evaluate fills r.Targets from the measured phases. A target whose
// scenario did not run is listed with Met nil.
func (r *Report) evaluate(conns int) {
	var ts []TargetResult
	add := func(name, want string, got string, met *bool) {
		ts = append(ts, TargetResult{Name: name, Want: want, Got: got, Met: met})
	}
	check := func(ok bool) *bool { return &ok }
	both := func(s string) (d, g *Phase) { return r.phase(s, "direct"), r.phase(s, "rolter") }

	if _, g := both("chat-c1"); g != nil {
		add("gateway ÷ mock CPU per request, non-streamed (chat-c1)", fmt.Sprintf("≤ %.1f", maxChatCPURatio),
			fmt.Sprintf("%.2f", g.CPURatio), check(g.CPURatio <= maxChatCPURatio))
	} else {
		add("gateway ÷ mock CPU per request, non-streamed (chat-c1)", fmt.Sprintf("≤ %.1f", maxChatCPURatio), "-", nil)
	}
	if _, g := both("stream-c1"); g != nil {
		add("gateway ÷ mock CPU per request, streamed 20 chunks (stream-c1)", fmt.Sprintf("≤ %.1f", maxStreamCPURatio),
			fmt.Sprintf("%.2f", g.CPURatio), check(g.CPURatio <= maxStreamCPURatio))
	} else {
		add("gateway ÷ mock CPU per request, streamed 20 chunks (stream-c1)", fmt.Sprintf("≤ %.1f", maxStreamCPURatio), "-", nil)
	}
	for _, f := range []struct {
		scenario, what string
		want           float64
	}{{"chat-c1", "non-streamed", maxChatFloorRatio}, {"stream-c1", "streamed 20 chunks", maxStreamFloorRatio}} {
		name := fmt.Sprintf("gateway ÷ floor CPU per request, %s (%s)", f.what, f.scenario)
		if g := r.phase(f.scenario, "rolter"); g != nil && g.FloorRatio > 0 {
			add(name, fmt.Sprintf("≤ %.1f", f.want), fmt.Sprintf("%.2f", g.FloorRatio), check(g.FloorRatio <= f.want))
		} else {
			add(name, fmt.Sprintf("≤ %.1f", f.want), "-", nil)
		}
	}
	if d, g := both("chat-c1"); d != nil && g != nil {
		added := g.Latency.P50 - d.Latency.P50
		add("added p50 latency, non-streamed, concurrency 1", fmt.Sprintf("≤ %.2f ms", maxAddedP50MS),
			fmt.Sprintf("%.3f ms", added), check(added <= maxAddedP50MS))
	} else {
		add("added p50 latency, non-streamed, concurrency 1", fmt.Sprintf("≤ %.2f ms", maxAddedP50MS), "-", nil)
	}
	if d, g := both("stream-c1"); d != nil && g != nil && d.TTFE != nil && g.TTFE != nil {
		added := g.TTFE.P50 - d.TTFE.P50
		add("added p50 time to first event, streamed, concurrency 1", fmt.Sprintf("≤ %.2f ms", maxAddedTTFEMS),
			fmt.Sprintf("%.3f ms", added), check(added <= maxAddedTTFEMS))
	} else {
		add("added p50 time to first event, streamed, concurrency 1", fmt.Sprintf("≤ %.2f ms", maxAddedTTFEMS), "-", nil)
	}
	for _, s := range []string{fmt.Sprintf("chat-c%d", conns), fmt.Sprintf("stream-c%d", conns)} {
		name := fmt.Sprintf("throughput through rolter ÷ direct at %d connections (%s)", conns, s)
		want := fmt.Sprintf("≥ %.0f%%", minThroughputPct)
		if d, g := both(s); d != nil && g != nil && d.ReqPerSec > 0 {
			pct := 100 * g.ReqPerSec / d.ReqPerSec
			add(name, want, fmt.Sprintf("%.0f%%", pct), check(pct >= minThroughputPct))
		} else {
			add(name, want, "-", nil)
		}
	}

	name := "CPU per request, largest catalog vs smallest (routes)"
	want := fmt.Sprintf("within ±%.0f%%", 100*maxCatalogDrift)
	if n := len(r.Routes); n >= 2 {
		last := r.Routes[n-1]
		drift := last.CPUVsSmallest - 1
		add(name, want, fmt.Sprintf("%+.1f%% (%d vs %d routes; request path alone %+.1f%%)", 100*drift, last.Routes, r.Routes[0].Routes, 100*(last.NetVsSmallest-1)),
			check(math.Abs(drift) <= maxCatalogDrift))
	} else {
		add(name, want, "-", nil)
	}
	for _, v := range []struct {
		routes int
		ms     float64
	}{{10_000, maxVisible10kMS}, {100_000, maxVisible100kMS}} {
		name, want := fmt.Sprintf("one admin write to visible, %d routes (p50)", v.routes), fmt.Sprintf("≤ %.0f ms", v.ms)
		if i := routesAt(r.Routes, v.routes); i >= 0 {
			// Both kinds of write count: a PATCH of a route, and a create
			// that adds to a provider's catalog.
			got, created := r.Routes[i].RebuildMS, r.Routes[i].CreateMS
			add(name, want, fmt.Sprintf("patch %.1f ms (max %.1f), create %.1f ms (max %.1f)", got.P50, got.Max, created.P50, created.Max),
				check(max(got.P50, created.P50) <= v.ms))
		} else {
			add(name, want, "-", nil)
		}
	}
	name, want = "peak RSS with 10,000 routes", fmt.Sprintf("≤ %.0f MB", maxRSS10kMB)
	if i := routesAt(r.Routes, 10000); i >= 0 {
		peak := float64(r.Routes[i].PeakRSS) / (1 << 20)
		add(name, want, fmt.Sprintf("%.1f MB (steady %.1f MB)", peak, float64(r.Routes[i].RSS)/(1<<20)), check(peak <= maxRSS10kMB))
	} else {
		add(name, want, "-", nil)
	}
	name, want = "peak RSS with 100,000 routes", fmt.Sprintf("≤ %.0f MB", maxRSS100kMB)
	name2, want2 := "start-up with 100,000 routes (to /readyz)", fmt.Sprintf("≤ %.0f s", maxReady100kS)
	if i := routesAt(r.Routes, 100000); i >= 0 {
		peak := float64(r.Routes[i].PeakRSS) / (1 << 20)
		add(name, want, fmt.Sprintf("%.1f MB (steady %.1f MB)", peak, float64(r.Routes[i].RSS)/(1<<20)), check(peak <= maxRSS100kMB))
		add(name2, want2, fmt.Sprintf("%.2f s", r.Routes[i].ReadyS), check(r.Routes[i].ReadyS <= maxReady100kS))
	} else {
		add(name, want, "-", nil)
		add(name2, want2, "-", nil)
	}
	name, want = "RSS per idle stream (gateway)", fmt.Sprintf("≤ %.0f KiB", maxStreamKiB)
	if i := r.Idle; i != nil && i.Open > 0 {
		add(name, want, fmt.Sprintf("%.1f KiB (%d streams)", i.GatewayKiB, i.Open), check(i.GatewayKiB <= maxStreamKiB))
	} else {
		add(name, want, "-", nil)
	}
	name, want = "rolter import of 10,000 routes over 1,000 providers into an empty SQLite store", fmt.Sprintf("≤ %.0f s", maxImportS)
	if i := r.Import; i != nil {
		add(name, want, fmt.Sprintf("%.2f s (%.2f s CPU)", i.WallS, i.CPUS), check(i.WallS <= maxImportS))
	} else {
		add(name, want, "-", nil)
	}
	r.Targets = ts
}

func routesAt(rs []RoutesResult, n int) int {
	for i, r := range rs {
		if r.Routes == n {
			return i
		}
	}
	return -1
}
