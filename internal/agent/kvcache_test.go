package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// kv-cache calibration (issue 18 §4): a kv_cache: auto recipe launches
// conservatively (at debug level), the agent reads the figure the fake
// vLLM logs as vLLM does and relaunches with exactly that
// --kv-cache-memory; both figures are reported; a restarted agent uses the
// kept figure without calibrating again.
func TestAgentKVCacheCalibration(t *testing.T) {
	e := newEnv(t)
	const want = 2358995846
	t.Setenv("ROLTER_FAKE_KV_WANT", "2358995846")
	smi := e.fakeSMI("0, NVIDIA L4, 24576, 24576")
	fs := newFleetServer(t)
	port := freePort(t)
	as := hfAssignment(8, port, "--max-model-len", "4096")
	as.Recipe.VLLM.KVCache = fleetapi.KVCacheAuto
	as.Recipe.VLLM.VRAMGB = 12
	fs.set(as)
	cfg := e.config(fs.url())
	cfg.NvidiaSMI = smi
	r := e.start(cfg)

	first := e.waitRun(port)
	if !slices.Contains(first.Env, "VLLM_LOGGING_LEVEL=DEBUG") {
		t.Error("the first launch does not log at debug level")
	}
	if v, _ := fleetapi.FlagValue(first.Argv, "--gpu-memory-utilization"); v != "0.5" {
		t.Errorf("first launch --gpu-memory-utilization = %q, want 0.5 (12 GB of a 24 GB L4)", v)
	}
	if _, ok := fleetapi.FlagValue(first.Argv, "--kv-cache-memory"); ok {
		t.Errorf("the first launch sets --kv-cache-memory: %q", first.Argv)
	}
	second := e.waitRun(port, first.PID)
	wantArgv := []string{"serve", "acme/tiny-chat", "--port", strconv.Itoa(port), "--max-model-len", "4096", "--kv-cache-memory=2358995846"}
	if !slices.Equal(second.Argv, wantArgv) {
		t.Errorf("relaunch argv = %q\nwant %q", second.Argv, wantArgv)
	}
	if slices.Contains(second.Env, "VLLM_LOGGING_LEVEL=DEBUG") {
		t.Error("the calibrated launch still logs at debug level")
	}
	if !e.exitedBySIGTERM(first.PID) {
		t.Error("the first launch was not stopped with SIGTERM")
	}
	testkit.Eventually(t, "both figures in a report", func() bool {
		ap, _, ok := fs.applied(8)
		kv := ap.KVCache
		return ok && ap.Revision == fleetapi.Revision(as) && kv != nil && kv.State == fleetapi.KVCalibrated &&
			kv.InitialBytes == 3<<29 && kv.Bytes == want
	})
	testkit.Eventually(t, "the figure in the state file", func() bool {
		st, err := loadState(e.state)
		return err == nil && st.KVCache[8].Bytes == want && st.KVCache[8].InitialBytes == 3<<29
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// A restarted agent launches straight at the calibrated figure.
	e.start(cfg)
	third := e.waitRun(port, first.PID, second.PID)
	if !slices.Equal(third.Argv, wantArgv) {
		t.Errorf("after restart argv = %q, want %q", third.Argv, wantArgv)
	}
	testkit.Eventually(t, "the kept figures reported", func() bool {
		ap, _, ok := fs.applied(8)
		return ok && ap.KVCache != nil && ap.KVCache.State == fleetapi.KVCalibrated && ap.KVCache.Bytes == want
	})
	if n := strings.Count(e.logs.String(), "kv-cache calibrated: relaunching"); n != 1 {
		t.Errorf("calibrated %d times, want once", n)
	}
}

// A vLLM that serves without logging the figure leaves the calibration
// failed, reported with why, and keeps serving at the conservative
// setting: it is not restarted.
func TestAgentKVCacheCalibrationWithoutFigure(t *testing.T) {
	e := newEnv(t)
	t.Setenv("ROLTER_FAKE_KV_WANT", "1000")
	t.Setenv("ROLTER_FAKE_KV_SILENT", "1")
	fs := newFleetServer(t)
	port := freePort(t)
	as := hfAssignment(9, port, "--gpu-memory-utilization", "0.6")
	as.Recipe.VLLM.KVCache = fleetapi.KVCacheAuto
	fs.set(as)
	e.start(e.config(fs.url()))
	first := e.waitRun(port)
	if n := strings.Count(strings.Join(first.Argv, " "), "--gpu-memory-utilization"); n != 1 {
		t.Errorf("the recipe's own utilization is not kept alone: %q", first.Argv)
	}
	testkit.Eventually(t, "the failed calibration in a report", func() bool {
		ap, _, ok := fs.applied(9)
		kv := ap.KVCache
		return ok && ap.Revision == fleetapi.Revision(as) && kv != nil && kv.State == fleetapi.KVFailed &&
			kv.InitialBytes == 3<<29 && kv.Bytes == 0 && strings.Contains(kv.Error, "without logging a --kv-cache-memory figure") &&
			ap.Fit == fleetapi.FitUnchecked
	})
	if r, ok := e.record(port); !ok || r.PID != first.PID || !alive(first.PID) {
		t.Error("vLLM was restarted after a failed calibration")
	}
	if _, err := os.Stat(filepath.Join(e.state, "vllm-9.log")); err != nil {
		t.Fatal(err)
	}
}

// The scanner reads vLLM's lines as its releases write them (the INFO
// variant of the suggestion names "consumed memory"; the DEBUG one
// "weight"), across reads that split a line.
func TestKVScan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vllm.log")
	k := &kvCalib{base: []string{"vllm", "serve", "m"}}
	k.status.State = fleetapi.KVCalibrating
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString(s)
		_ = f.Close()
	}
	write("(EngineCore pid=114) INFO 09-25 01:58:00 [gpu_worker.py:625] Available KV cache memory: 2.41 GiB\n" +
		"(EngineCore pid=114) INFO 09-25 02:25:51 [gpu_worker.py:860] Free memory on device (4.95/6.0 GiB) on startup. " +
		"Desired GPU memory utilization is (0.79, 4.74 GiB). Actual usage is 2.1 GiB for consumed memory (weights + non-torch), " +
		"0.22 GiB for peak activation, and 0.07 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-")
	if argv := k.scan(path); argv != nil || k.snapshot().InitialBytes != 2587717795 {
		t.Fatalf("after a split line: %q, %+v", argv, k.snapshot())
	}
	write("memory=2358995846` (2.2 GiB) to fit into requested memory, or `--kv-cache-memory=2590736384` (2.41 GiB) to fully utilize gpu memory. Current kv cache memory in use is 2.41 GiB.\n")
	argv := k.scan(path)
	if want := []string{"vllm", "serve", "m", "--kv-cache-memory=2358995846"}; !slices.Equal(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
	if st := k.snapshot(); st.State != fleetapi.KVCalibrated || st.Bytes != 2358995846 {
		t.Errorf("status %+v", st)
	}
}
