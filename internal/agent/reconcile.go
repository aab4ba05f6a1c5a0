package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/fleetapi"
)

func revisionOf(as fleetapi.Assignment) string {
	if as.Revision != "" {
		return as.Revision
	}
	return fleetapi.Revision(as)
}

// reconcile makes the running set match desired and returns the hardware
// it saw.
func (a *Agent) reconcile(ctx context.Context, desired []fleetapi.Assignment) hardware {
	hw := discoverHardware(ctx, a.cfg.NvidiaSMI, a.cfg.ModelsDir, a.diskFree)
	if !hw.SMIFound && !a.smiWarned {
		a.smiWarned = true
		a.log.Warn("nvidia-smi not found: no GPU discovered, VRAM fit checks are skipped", "nvidia_smi", a.cfg.NvidiaSMI)
	}
	if msg := errString(hw.GPUErr); msg != a.lastGPUErr {
		a.lastGPUErr = msg
		if msg != "" {
			a.log.Error("cannot discover GPUs", "error", msg)
		}
	}

	want := map[int64]bool{}
	for _, as := range desired {
		want[as.HostID] = true
	}
	// Retired hosts first: they may free a port a new host uses.
	for id, c := range a.children {
		if !want[id] {
			c.log.Info("host no longer assigned to this box; stopping its vLLM")
			c.stop()
			delete(a.children, id)
			delete(a.applied, id)
		}
	}
	for _, m := range []map[int64]string{a.errs, a.logged, a.pending} {
		for id := range m {
			if !want[id] {
				delete(m, id)
			}
		}
	}
	for id := range a.applied {
		if !want[id] && a.children[id] == nil {
			delete(a.applied, id)
		}
	}

	a.waiting = map[int64]*downloadJob{}
	ports := map[int]int64{}
	seen := map[int64]bool{}
	for _, as := range desired {
		if ctx.Err() != nil {
			break
		}
		as.Revision = revisionOf(as)
		delete(a.errs, as.HostID)
		if seen[as.HostID] {
			continue // a duplicate entry; the first one counts
		}
		seen[as.HostID] = true
		if other, dup := ports[as.Port]; dup {
			a.refuse(as, fmt.Errorf("port %d is also assigned to host %d", as.Port, other))
			continue
		}
		ports[as.Port] = as.HostID
		a.reconcileOne(ctx, as, hw)
	}
	a.settleDownloads()
	a.keepCalibrations(want)
	a.saveState()
	return hw
}

// keepCalibrations records the calibrations the children finished (for
// the state file) and forgets those of hosts no longer assigned.
func (a *Agent) keepCalibrations(want map[int64]bool) {
	for id := range a.kvRecords {
		if !want[id] {
			delete(a.kvRecords, id)
		}
	}
	for id, c := range a.children {
		if st := c.kv.snapshot(); st != nil && st.State == fleetapi.KVCalibrated {
			a.kvRecords[id] = kvRecord{Revision: c.a.Revision, GPUs: c.place.GPUs, InitialBytes: st.InitialBytes, Bytes: st.Bytes}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (a *Agent) reconcileOne(ctx context.Context, as fleetapi.Assignment, hw hardware) {
	id := as.HostID
	c := a.children[id]
	pid := 0
	if c != nil {
		pid, _ = c.running()
		if c.a.Revision == as.Revision {
			delete(a.pending, id)
			delete(a.logged, id)
			return
		}
		// A running vLLM restarts only when allowed: apply or auto-apply,
		// and the gateway's drain of the host (if any) is over, so no
		// request in flight to it is dropped.
		if pid != 0 && !as.RestartAllowed() {
			wait := "apply"
			if as.Drain != nil && as.Drain.State == fleetapi.DrainDraining {
				wait = "drain"
			}
			if a.pending[id] != wait+" "+as.Revision {
				a.pending[id] = wait + " " + as.Revision
				a.log.Info("new revision waits for "+wait+"; vLLM keeps running the applied one",
					"host_id", id, "running", c.a.Revision, "new", as.Revision)
			}
			if wait == "drain" {
				// The restart is coming: fetch its weights meanwhile, so
				// the host is not out of routing for the download. What
				// else prepare finds is reported once the drain is over.
				_, _ = a.prepare(ctx, as, hw)
			}
			return
		}
	}
	delete(a.pending, id)

	l, err := a.prepare(ctx, as, hw)
	var dl *errDownloading
	if errors.As(err, &dl) {
		// Not a refusal: the report shows the progress, and what runs
		// keeps running until the weights are complete.
		delete(a.logged, id)
		return
	}
	if err != nil {
		if pid != 0 {
			err = fmt.Errorf("revision %s not applied (still running %s): %w", as.Revision, c.a.Revision, err)
		}
		a.refuse(as, err)
		return
	}
	var rec *kvRecord
	if r, ok := a.kvRecords[id]; ok {
		rec = &r
	}
	l, kv := kvLaunch(l, as, hw, rec)
	if c != nil {
		a.log.Info("applying new revision: restarting vLLM", "host_id", id, "from", c.a.Revision, "to", as.Revision)
		c.stop()
		delete(a.children, id)
		delete(a.applied, id)
	}
	nc := &child{
		a:          as,
		argv:       l.argv,
		env:        l.env,
		place:      l.place,
		kv:         kv,
		kvTick:     a.kvTick,
		logPath:    filepath.Join(a.cfg.StateDir, fmt.Sprintf("vllm-%d.log", id)),
		grace:      a.cfg.StopGrace,
		log:        a.log.With("host_id", id, "route", as.ModelName, "port", as.Port, "revision", as.Revision),
		restartMin: a.restartMin,
		restartMax: a.restartMax,
	}
	if err := nc.start(); err != nil {
		a.refuse(as, err)
		return
	}
	a.children[id] = nc
	a.applied[id] = as
	delete(a.logged, id)
}

// refuse records why a host's assignment does not run, and logs it when
// the reason changes.
func (a *Agent) refuse(as fleetapi.Assignment, err error) {
	msg := err.Error()
	a.errs[as.HostID] = msg
	if a.logged[as.HostID] != msg {
		a.logged[as.HostID] = msg
		model := ""
		if as.Recipe.VLLM != nil {
			model = as.Recipe.VLLM.Model
		}
		a.log.Error("refusing assignment", "host_id", as.HostID, "route", as.ModelName, "model", model, "revision", as.Revision, "reason", msg)
	}
}

// launch is a prepared vLLM command line.
type launch struct {
	argv  []string // holds the API key
	env   []string
	place placement
}

// prepare validates as, locates its weights, checks the fit, downloads
// what is missing and builds the command line.
func (a *Agent) prepare(ctx context.Context, as fleetapi.Assignment, hw hardware) (launch, error) {
	v := as.Recipe.VLLM
	switch {
	case v == nil:
		return launch{}, errors.New("the recipe has no vllm block")
	case v.Model == "":
		return launch{}, errors.New("the recipe has no model")
	case as.Port < 1 || as.Port > 65535:
		return launch{}, fmt.Errorf("invalid port %d", as.Port)
	case as.APIKey == "":
		return launch{}, errors.New("the assignment has no api_key; vLLM would accept any caller")
	}
	for _, f := range []string{"--port", "--api-key"} {
		if _, ok := fleetapi.FlagValue(v.Args, f); ok {
			return launch{}, fmt.Errorf("recipe args must not set %s: the assignment sets it", f)
		}
	}
	w, err := locateWeights(v, a.cfg.ModelsDir, a.download)
	if err != nil {
		return launch{}, err
	}
	if err := checkFit(v, hw, w.Present); err != nil {
		return launch{}, err
	}
	n, tp, err := gpuCount(v.Args)
	if err != nil {
		return launch{}, err
	}
	others, self := a.holdings(as.HostID)
	pl, err := place(hw, v.VRAMGB, n, tp, others, self)
	if err != nil {
		return launch{}, err
	}
	model := w.Model
	if w.download != nil {
		// Beside the loop: *errDownloading until the job has ended.
		if model, err = a.awaitDownload(ctx, as, w); err != nil {
			return launch{}, err
		}
	}

	// The API key goes to vLLM as VLLM_API_KEY, which it reads like
	// --api-key: in argv, every local user could read it with ps. LaunchDoc
	// says this to operators (rolter agent -h).
	argv := append(slices.Clone(a.cfg.Command), "serve", model, "--port", strconv.Itoa(as.Port))
	argv = append(argv, v.Args...)
	if model != v.Model {
		if _, ok := fleetapi.FlagValue(v.Args, "--served-model-name"); !ok {
			argv = append(argv, "--served-model-name", v.ServedName())
		}
	}
	if w.Revision != "" {
		if _, ok := fleetapi.FlagValue(v.Args, "--revision"); !ok {
			argv = append(argv, "--revision", w.Revision)
		}
	}
	// Appended last, the placement overrides an inherited
	// CUDA_VISIBLE_DEVICES (exec keeps the last value of a key).
	extra := append(slices.Clone(w.Env), pl.gpuEnv()...)
	// The hf source's token, like the API key, goes only in the
	// environment, as HF_TOKEN (which vLLM's Hugging Face downloads read);
	// it overrides one the agent inherited.
	if as.HFToken != "" && (v.Source.Kind == fleetapi.SourceHF || v.Source.Kind == "") {
		extra = append(extra, "HF_TOKEN="+as.HFToken)
	}
	return launch{argv: argv, env: a.childEnv(append(extra, "VLLM_API_KEY="+as.APIKey)), place: pl}, nil
}

// LaunchDoc is how the agent starts vLLM, as rolter agent -h says it;
// TestLaunchMatchesDoc holds prepare to it.
const LaunchDoc = `the agent runs it as COMMAND serve MODEL --port P followed by the recipe's args ` +
	`(and --served-model-name, --revision when the recipe needs them); the API key goes in the environment as VLLM_API_KEY, never in argv`

// childEnv is the agent's environment for vLLM, without the fleet key,
// plus extra.
func (a *Agent) childEnv(extra []string) []string {
	key := a.cfg.FleetKey.Reveal()
	var env []string
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		// An inherited VLLM_API_KEY would be a second, foreign key.
		if name == "ROLTER_FLEET_KEY" || name == "VLLM_API_KEY" || val == key {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
