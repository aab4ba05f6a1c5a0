package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/bench"
)

// benchCmd runs the load tool (package bench): it starts `rolter mock` and
// `rolter serve` from this same binary, measures each scenario directly at
// the mock and through rolter, prints the table and writes the JSON.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o         bench.Options
		scenarios string
		scale     string
		jsonOut   string
		compare   string
	)
	fs.DurationVar(&o.Duration, "duration", 5e9, "measured time per scenario and path")
	fs.DurationVar(&o.Warmup, "warmup", 5e8, "unmeasured warm-up before each measurement")
	fs.IntVar(&o.Conns, "conns", 64, "connections of the high-concurrency scenarios")
	fs.IntVar(&o.Routes, "routes", 10, "routes in the gateway's catalog, the bench route included")
	fs.IntVar(&o.PoolSize, "pool-size", 1, "targets of the chat scenarios' route, each its own provider at the mock (at most 10000)")
	fs.StringVar(&scale, "scale-routes", "10000,100000", "catalog sizes of the routes scenario, comma-separated")
	fs.IntVar(&o.Streams, "streams", 10000, "streams of the idle-streams scenario")
	fs.IntVar(&o.KeyRPM, "key-rpm", 0, "rpm_limit of the bench key (0: none), to measure the rate limit check")
	fs.IntVar(&o.KeyTPM, "key-tpm", 0, "tpm_limit of the bench key (0: none)")
	fs.BoolVar(&o.Trace, "trace", false, "also run each core scenario through a gateway exporting OpenTelemetry spans to a sink in the bench; report CPU per request with tracing off and on")
	fs.StringVar(&scenarios, "scenarios", "default", `comma-separated scenario names (chat-c1, stream-c1, chat-cN and stream-cN for --conns N, rate-200, rate-1000, routes, idle-streams, fleet, import), "default" (the load patterns) or "all" (see docs/performance.md)`)
	fs.IntVar(&o.Fleet.Hosts, "hosts", 100, "fake GPU boxes of the fleet scenario")
	fs.DurationVar(&o.Fleet.AgentInterval, "fleet-agent-interval", 10e9, "fleet scenario: how often each fake agent polls /vllm/config")
	fs.DurationVar(&o.Fleet.ProbeInterval, "fleet-probe-interval", 2e9, "fleet scenario: the gateway's --fleet-probe-interval and --probe-interval")
	fs.IntVar(&o.Fleet.FailAfter, "fleet-fail-after", 3, "fleet scenario: the gateway's --fleet-fail-after")
	fs.DurationVar(&o.Fleet.Steady, "fleet-steady", 0, "fleet scenario: how long the steady state is measured (default two agent intervals)")
	fs.IntVar(&o.Fleet.Requests, "fleet-requests", 3000, "fleet scenario: chat requests of the kill test")
	fs.Float64Var(&o.Fleet.Rate, "fleet-rate", 100, "fleet scenario: chat requests per second of the kill test")
	fs.StringVar(&jsonOut, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&compare, "compare", "", "a JSON report of an earlier run: print this run's ratios to it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.Scenarios = strings.Split(scenarios, ",")
	for _, s := range strings.Split(scale, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--scale-routes: %q is not a positive integer", s)
		}
		o.ScaleRoutes = append(o.ScaleRoutes, n)
	}
	var old *bench.Report
	if compare != "" { // read it first: a typo should not cost a whole run
		var err error
		if old, err = bench.ReadJSON(compare); err != nil {
			return err
		}
	}
	o.Progress = stderr
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	rep.Print(stdout)
	if old != nil {
		bench.PrintCompare(stdout, compare, old, rep)
	}
	if jsonOut != "" {
		if err := rep.WriteJSON(jsonOut); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rolter bench: wrote %s\n", jsonOut)
	}
	return nil
}
