package bench

import (
	"fmt"
	"slices"
	"strings"
)

// scenario is one load pattern, run first directly at the mock and then
// through rolter.
type scenario struct {
	name   string
	stream bool    // streamed chat with streamChunks content chunks
	conc   int     // closed loop: connections, each sending back to back
	rate   float64 // open loop: requests per second (conc is 0)
}

// streamChunks is the streamed reply: 20 content chunks.
const streamChunks = 20

// Names of the scenarios that are not a load pattern over the main gateway.
const (
	scaleScenario = "routes"       // per-request cost and rebuild time over large catalogs
	idleScenario  = "idle-streams" // RSS per idle stream
)

// coreScenarios are the load patterns of the default run; conns is the
// --conns value.
func coreScenarios(conns int) []scenario {
	return []scenario{
		{name: "chat-c1", conc: 1},
		{name: "stream-c1", stream: true, conc: 1},
		{name: fmt.Sprintf("chat-c%d", conns), conc: conns},
		{name: fmt.Sprintf("stream-c%d", conns), stream: true, conc: conns},
		{name: "rate-200", rate: 200},
		{name: "rate-1000", rate: 1000},
	}
}

// selection is what a --scenarios list resolves to.
type selection struct {
	core                    []scenario
	scale, idle, fleet, imp bool
}

// selectScenarios resolves names: scenario names, "default" (every core
// scenario) and "all" (everything, scale scenarios included).
func selectScenarios(names []string, conns int) (selection, error) {
	all := coreScenarios(conns)
	var sel selection
	add := func(s scenario) {
		if !slices.ContainsFunc(sel.core, func(x scenario) bool { return x.name == s.name }) {
			sel.core = append(sel.core, s)
		}
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch n {
		case "", "default":
			for _, s := range all {
				add(s)
			}
		case "all":
			for _, s := range all {
				add(s)
			}
			sel.scale, sel.idle, sel.fleet, sel.imp = true, true, true, true
		case scaleScenario:
			sel.scale = true
		case idleScenario:
			sel.idle = true
		case fleetScenario:
			sel.fleet = true
		case importScenario:
			sel.imp = true
		default:
			i := slices.IndexFunc(all, func(s scenario) bool { return s.name == n })
			if i < 0 {
				return selection{}, fmt.Errorf("unknown scenario %q; known: %s", n, strings.Join(scenarioNames(conns), ", "))
			}
			add(all[i])
		}
	}
	// Run in the documented order whatever order they were named in.
	slices.SortStableFunc(sel.core, func(a, b scenario) int {
		return slices.IndexFunc(all, func(s scenario) bool { return s.name == a.name }) -
			slices.IndexFunc(all, func(s scenario) bool { return s.name == b.name })
	})
	return sel, nil
}

// scenarioNames lists every name --scenarios accepts.
func scenarioNames(conns int) []string {
	var names []string
	for _, s := range coreScenarios(conns) {
		names = append(names, s.name)
	}
	return append(names, scaleScenario, idleScenario, fleetScenario, importScenario, "default", "all")
}
