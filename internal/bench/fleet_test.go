package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The fleet scenario end to end at 12 hosts with short intervals: every
// host registers, the agents' polls succeed, the steady-state figures are
// read, and the killed box (host id 10) leaves routing and is
// deregistered.
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
	rep, err := Run(ctx, Options{Exe: exe, Scenarios: []string{"fleet"}, Fleet: FleetOptions{Hosts: 12,
		AgentInterval: time.Second, ProbeInterval: 500 * time.Millisecond, FailAfter: 2, Steady: 2 * time.Second,
		Requests: 200, Rate: 50}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Fleet
	if f == nil || f.Hosts != 12 || len(rep.Phases) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	if f.ConfigRequests == 0 || f.ConfigErrors != 0 {
		t.Fatalf("/vllm/config polls: %d, %d errors (%s)", f.ConfigRequests, f.ConfigErrors, f.ConfigFirstError)
	}
	if f.Killed != 1 || f.Requests == 0 || f.LeaveRoutingS < 0 || f.DeregisteredS < 0 {
		t.Fatalf("kill test: %+v", f)
	}
	if f.GatewayCores <= 0 || f.RSS <= 0 || f.Goroutines <= 0 || f.FDs <= 0 {
		t.Fatalf("steady state: %+v", f)
	}
}
