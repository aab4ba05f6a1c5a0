package bench

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestFloorRatioReported checks that gateway ÷ floor CPU reaches the
// targets, the text report, the JSON and --compare.
func TestFloorRatioReported(t *testing.T) {
	r := &Report{Phases: []Phase{
		{Scenario: "chat-c1", Via: "direct", MockCPU: 100},
		{Scenario: "chat-c1", Via: "floor", MockCPU: 100, FloorCPU: 400, CPURatio: 4},
		{Scenario: "chat-c1", Via: "rolter", MockCPU: 100, GatewayCPU: 180, CPURatio: 1.8, FloorRatio: 0.45},
		{Scenario: "stream-c1", Via: "floor", MockCPU: 300, FloorCPU: 600, CPURatio: 2},
		{Scenario: "stream-c1", Via: "rolter", MockCPU: 300, GatewayCPU: 540, CPURatio: 1.8, FloorRatio: 0.9},
	}}
	r.evaluate(64)
	met := map[string]*bool{}
	for _, tr := range r.Targets {
		met[tr.Name] = tr.Met
	}
	if m := met["gateway ÷ floor CPU per request, non-streamed (chat-c1)"]; m == nil || !*m {
		t.Errorf("chat-c1 at 0.45 of the floor: met = %v, want met", m)
	}
	if m := met["gateway ÷ floor CPU per request, streamed 20 chunks (stream-c1)"]; m == nil || *m {
		t.Errorf("stream-c1 at 0.9 of the floor: met = %v, want not met", m)
	}

	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"gw÷floor", "0.45", "0.90", "400.0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}

	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := back.phase("chat-c1", "rolter"); p == nil || p.FloorRatio != 0.45 {
		t.Fatalf("JSON round trip lost the floor ratio: %+v", p)
	}
	if p := back.phase("chat-c1", "floor"); p == nil || p.FloorCPU != 400 {
		t.Fatalf("JSON round trip lost the floor's CPU: %+v", p)
	}
	back.phase("chat-c1", "rolter").FloorRatio = 0.9
	out.Reset()
	PrintCompare(&out, "old", back, r)
	if !strings.Contains(out.String(), "gw÷floor") || !strings.Contains(out.String(), "0.50") {
		t.Errorf("--compare lacks gw÷floor 0.50 (0.45 ÷ 0.9):\n%s", out.String())
	}
}

// TestScaleTargetsReported: the routes scenario's 100,000-route row gives
// the issue 21 targets for peak RSS and start-up; without it they are
// listed as not run.
func TestScaleTargetsReported(t *testing.T) {
	find := func(r *Report, name string) *TargetResult {
		for i := range r.Targets {
			if r.Targets[i].Name == name {
				return &r.Targets[i]
			}
		}
		t.Fatalf("no target %q", name)
		return nil
	}
	r := &Report{Routes: []RoutesResult{{Routes: 10, ReadyS: 0.1}, {Routes: 100000, ReadyS: 2.5, RSS: 200 << 20, PeakRSS: 250 << 20}}}
	r.evaluate(64)
	if tr := find(r, "peak RSS with 100,000 routes"); tr.Met == nil || !*tr.Met || tr.Got != "250.0 MB (steady 200.0 MB)" {
		t.Errorf("peak RSS at 100,000 routes: %+v", tr)
	}
	if tr := find(r, "start-up with 100,000 routes (to /readyz)"); tr.Met == nil || *tr.Met || tr.Got != "2.50 s" {
		t.Errorf("start-up at 100,000 routes: %+v", tr)
	}
	r = &Report{Routes: []RoutesResult{{Routes: 10}, {Routes: 10000}}}
	r.evaluate(64)
	if tr := find(r, "start-up with 100,000 routes (to /readyz)"); tr.Met != nil || tr.Got != "-" {
		t.Errorf("without a 100,000-route row: %+v", tr)
	}
}

// TestVisibleTargets checks the targets for one admin write to
// visible: p50 at 10,000 and 100,000 routes, of PATCHes and of creates.
func TestVisibleTargets(t *testing.T) {
	r := &Report{Routes: []RoutesResult{
		{Routes: 10, RebuildMS: dist{P50: 3, Max: 5}, CreateMS: dist{P50: 3, Max: 5}},
		{Routes: 10_000, RebuildMS: dist{P50: 19, Max: 40}, CreateMS: dist{P50: 12, Max: 30}},
		{Routes: 100_000, RebuildMS: dist{P50: 120, Max: 150}, CreateMS: dist{P50: 20, Max: 30}},
	}}
	r.evaluate(64)
	met := map[string]*bool{}
	for _, tr := range r.Targets {
		met[tr.Name] = tr.Met
	}
	if m := met["one admin write to visible, 10000 routes (p50)"]; m == nil || !*m {
		t.Errorf("19 ms at 10,000 routes: met = %v, want met", m)
	}
	if m := met["one admin write to visible, 100000 routes (p50)"]; m == nil || *m {
		t.Errorf("120 ms at 100,000 routes: met = %v, want not met", m)
	}
	// A slow create misses the target however fast the PATCHes are.
	r.Routes[1].CreateMS.P50 = 25
	r.evaluate(64)
	for _, tr := range r.Targets {
		if tr.Name == "one admin write to visible, 10000 routes (p50)" && (tr.Met == nil || *tr.Met) {
			t.Errorf("creates of 25 ms at 10,000 routes: met = %v, want not met", tr.Met)
		}
	}
}
