package bench

import (
	"context"
	"fmt"
	"time"
)

// rebuildWrites is how many admin writes the routes scenario times per
// catalog.
const rebuildWrites = 5

// idleWindow is how long the routes scenario watches a gateway without
// traffic to measure its background CPU, and minPhase the least it runs
// load on it. The gateway probes every provider about every 10s, in bursts,
// so both span two probe rounds: shorter windows would catch a burst or
// miss it by chance.
const (
	idleWindow = 20 * time.Second
	minPhase   = 20 * time.Second
)

// runRoutes is the routes scenario: for the --routes catalog and each
// --scale-routes catalog, a fresh gateway runs chat-c1 through rolter and
// times admin writes, each of which rebuilds the routing snapshot. Every
// catalog gets its own process, so that each peak RSS is its own.
func (b *run) runRoutes(ctx context.Context, mock *child, mockURL string) error {
	sizes := append([]int{b.opts.Routes}, b.opts.ScaleRoutes...)
	chat := scenario{name: "chat-c1", conc: 1}
	for _, n := range sizes {
		fmt.Fprintf(b.opts.Progress, "routes: seeding and starting a gateway with %d routes\n", n)
		gw, err := startGateway(ctx, b.opts.Exe, mockURL, n, 1, b.opts.keyFields())
		if err != nil {
			return err
		}
		res, err := b.routesAt(ctx, gw, chat, mock)
		gw.stop()
		if err != nil {
			return err
		}
		res.Providers = min(n-1, maxFillerProviders) + 1 // fillers and the mock
		res.CPUVsSmallest, res.NetVsSmallest = 1, 1
		if len(b.rep.Routes) > 0 {
			first := b.rep.Routes[0]
			if first.Phase.GatewayCPU > 0 {
				res.CPUVsSmallest = res.Phase.GatewayCPU / first.Phase.GatewayCPU
			}
			if first.NetCPU > 0 {
				res.NetVsSmallest = res.NetCPU / first.NetCPU
			}
		}
		b.rep.Routes = append(b.rep.Routes, res)
		fmt.Fprintf(b.opts.Progress, "routes: %d routes: ready in %.2fs, rebuild p50 %.1f ms, create p50 %.1f ms, idle %.3f cores, %.1f µs/req (%.1f net), peak RSS %s MB\n",
			n, res.ReadyS, res.RebuildMS.P50, res.CreateMS.P50, res.IdleCPU, res.Phase.GatewayCPU, res.NetCPU, mb(res.PeakRSS))
	}
	return nil
}

func (b *run) routesAt(ctx context.Context, gw *gatewayProc, chat scenario, mock *child) (RoutesResult, error) {
	res := RoutesResult{Routes: gw.routes, SeedS: gw.seedTime.Seconds(), ReadyS: gw.readyTime.Seconds(),
		CreateRouteMS: ms(gw.createRoute)}
	// Background work grows with the catalog (the gateway probes every
	// provider's health), so it is measured on its own, with no traffic,
	// and the request path's own cost is reported net of it as well.
	idle0, err := sampleProc(gw.pid())
	if err != nil {
		return res, err
	}
	time.Sleep(idleWindow)
	// The peak since start (store open, first snapshot, the admin writes,
	// the first round of probes) is read before the phase resets it.
	startup, err := sampleProc(gw.pid())
	if err != nil {
		return res, err
	}
	res.IdleCPU = float64(startup.cpuTicks-idle0.cpuTicks) / float64(b.ticks) / idleWindow.Seconds()
	if res.Phase, err = b.phaseFor(ctx, chat, gw.endpoint(), gw.child, mock, max(b.opts.Duration, minPhase)); err != nil {
		return res, err
	}
	loaded, err := sampleProc(gw.pid())
	if err != nil {
		return res, err
	}
	res.RSS = loaded.rss
	if ok := res.Phase.Requests - res.Phase.Errors; ok > 0 {
		busy := res.IdleCPU * res.Phase.Seconds * 1e6 / float64(ok)
		res.NetCPU = max(res.Phase.GatewayCPU-busy, 0)
	}
	rebuilds, err := gw.rebuildTimes(ctx, rebuildWrites)
	if err != nil {
		return res, err
	}
	res.RebuildMS = distOf(rebuilds)
	creates, err := gw.createTimes(ctx, rebuildWrites)
	if err != nil {
		return res, err
	}
	res.CreateMS = distOf(creates)
	end, err := sampleProc(gw.pid())
	if err != nil {
		return res, err
	}
	res.PeakRSS = max(startup.hwm, res.Phase.GatewayPeakRSS, end.hwm)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
