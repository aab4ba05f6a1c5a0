package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// The fleet scenario end to end at 8 hosts with short intervals: every
// host registers, the agents' polls succeed, the steady-state figures are
// read, and the killed box (the last: fewer than ten boxes still lose
// one) leaves routing and is deregistered. Every request due is counted,
// sent or dropped.
func TestFleetScenarioSmall(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("builds rolter and runs a gateway; not with -short")
	}
	exe := filepath.Join(t.TempDir(), "rolter")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/rolter/rolter/cmd/rolter").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Exe: exe, Scenarios: []string{"fleet"}, Fleet: FleetOptions{Hosts: 8,
		AgentInterval: time.Second, ProbeInterval: 500 * time.Millisecond, FailAfter: 2, Steady: 2 * time.Second,
		Requests: 200, Rate: 50}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Fleet
	if f == nil || f.Hosts != 8 || len(rep.Phases) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	if f.ConfigRequests == 0 || f.ConfigErrors != 0 {
		t.Fatalf("/vllm/config polls: %d, %d errors (%s)", f.ConfigRequests, f.ConfigErrors, f.ConfigFirstError)
	}
	if f.Killed != 1 || f.Requests != 200 || f.Failed < f.Dropped || f.LeaveRoutingS < 0 || f.DeregisteredS < 0 {
		t.Fatalf("kill test: %+v", f)
	}
	if f.GatewayCores <= 0 || f.RSS <= 0 || f.Goroutines <= 0 || f.FDs <= 0 {
		t.Fatalf("steady state: %+v", f)
	}
}

// The kill test kills every tenth box by position, and one at least.
func TestFleetVictims(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, nil}, {1, []int{0}}, {8, []int{7}}, {9, []int{8}}, {10, []int{9}}, {19, []int{9}}, {25, []int{9, 19}},
	} {
		if got := fleetVictims(c.n); !slices.Equal(got, c.want) {
			t.Errorf("fleetVictims(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	if got := fleetVictims(1000); len(got) != 100 || got[99] != 999 {
		t.Errorf("fleetVictims(1000): %d boxes, last %d", len(got), got[len(got)-1])
	}
}

// A killed host's provider is out of routing when it reads not ready or
// is gone (404); any other failure to read it is an error, not "gone".
func TestFleetProvidersOutOnlyGoneOn404(t *testing.T) {
	status := http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/admin/v1/orgs/" + orgName + "/providers/fleet-7":
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":{"code":"x","message":"x"}}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	gw := &gatewayProc{url: srv.URL, admin: "ra-test"}
	hs := []fleetHost{{ID: 7, State: "serving", Provider: "fleet-7"}, {ID: 8, State: "serving", Provider: "fleet-8"}}
	killed := map[int64]bool{7: true}
	ctx := context.Background()
	if out, err := fleetProvidersOut(ctx, gw, hs, killed); !out[7] || err != nil {
		t.Fatalf("provider gone (404): out %v, %v", out, err)
	}
	for _, status = range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusUnauthorized} {
		out, err := fleetProvidersOut(ctx, gw, hs, killed)
		var se *adminStatusError
		if out[7] || !errors.As(err, &se) || se.status != status {
			t.Fatalf("provider read answered %d: out %v, %v", status, out, err)
		}
	}
	srv.Close()
	if out, err := fleetProvidersOut(ctx, gw, hs, killed); out[7] || err == nil {
		t.Fatalf("gateway unreachable: out %v, %v", out, err)
	}
	// A killed host already down needs no provider read.
	if out, err := fleetProvidersOut(ctx, gw, []fleetHost{{ID: 7, State: "down"}}, killed); !out[7] || err != nil {
		t.Fatalf("down host: out %v, %v", out, err)
	}
}

// The kill watch times each box from its own first refusal: the worst
// box's span, -1 while some box was never seen out.
func TestKillWatchFromFirstRefusal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := newKillWatch(map[int64]bool{1: true, 2: true})
	serving := []fleetHost{{ID: 1, State: "serving", Provider: "host-1"}, {ID: 2, State: "serving", Provider: "host-2"}}
	w.observe(t0, serving, nil, nil)
	w.observe(t0.Add(time.Second), serving, map[string]float64{"host-1": 1}, nil)
	w.observe(t0.Add(2*time.Second), serving, map[string]float64{"host-1": 3}, map[int64]bool{1: true})
	if leave, dereg := w.worst(); leave != -1 || dereg != -1 {
		t.Fatalf("box 2 not seen out: %v %v", leave, dereg)
	}
	down := []fleetHost{{ID: 1, State: "down"}, {ID: 2, State: "down"}}
	w.observe(t0.Add(9*time.Second), down, nil, map[int64]bool{1: true, 2: true})
	// Box 1: refused at 1s, out at 2s, down at 9s; box 2: all at 9s.
	if leave, dereg := w.worst(); leave != 1 || dereg != 8 {
		t.Fatalf("worst spans: leave %v, deregistered %v; want 1 and 8", leave, dereg)
	}
}
