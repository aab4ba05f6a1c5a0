package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// The basic cycle: fetch, launch, serve, report (revision, discoveries,
// vLLM version), and the SIGTERM path: cancel stops vLLM with SIGTERM.
// Secrets stay out of logs and out of vLLM's environment.
func TestAgentRunsReportsAndStops(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	port := freePort(t)
	fs.set(hfAssignment(7, port, "--max-model-len", "4096"))
	r := e.start(e.config(fs.url()))

	rec := e.waitRun(port)
	want := []string{"serve", "acme/tiny-chat", "--port", strconv.Itoa(port), "--max-model-len", "4096"}
	if !slices.Equal(rec.Argv, want) {
		t.Errorf("argv = %q, want %q", rec.Argv, want)
	}
	for _, kv := range rec.Env {
		if strings.Contains(kv, testFleetKey) {
			t.Errorf("the fleet key reached vLLM's environment: %s", strings.SplitN(kv, "=", 2)[0])
		}
		if kv == "HF_HUB_OFFLINE=1" {
			t.Error("HF_HUB_OFFLINE=1 set for a model that is not cached")
		}
	}
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/v1/models", port), testAPIKey); code != 200 || !strings.Contains(body, `"acme/tiny-chat"`) {
		t.Errorf("/v1/models = %d %s", code, body)
	}
	if code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/v1/models", port), ""); code != http.StatusUnauthorized {
		t.Errorf("/v1/models without the key = %d, want 401", code)
	}

	rev := fleetapi.Revision(hfAssignment(7, port, "--max-model-len", "4096"))
	testkit.Eventually(t, "a report with the revision and the vLLM version", func() bool {
		ap, d, ok := fs.applied(7)
		return ok && ap.Revision == rev && ap.Error == "" && d.VLLMVersion == fakeVersion && d.DiskFreeGB > 0
	})
	if _, d, _ := fs.applied(7); d.GPUCount != 0 || d.VRAMGB != 0 || d.GPU != "" {
		t.Errorf("discovered GPUs without nvidia-smi: %+v", d)
	}

	// State file: 0600, holds the config and the applied revision.
	fi, err := os.Stat(filepath.Join(e.state, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	st, err := loadState(e.state)
	if err != nil || st.Config == nil || st.Applied[7].Revision != rev {
		t.Errorf("state = %+v, %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(e.state, "vllm-7.log")); err != nil || !strings.Contains(string(b), "fake vllm serving acme/tiny-chat") {
		t.Errorf("vLLM log: %q, %v", b, err)
	}

	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if alive(rec.PID) {
		t.Error("vLLM still runs after Run returned")
	}
	if !e.exitedBySIGTERM(rec.PID) {
		t.Error("vLLM did not exit through its SIGTERM handler")
	}
	logs := e.logs.String()
	for _, s := range []string{testFleetKey, testAPIKey} {
		if strings.Contains(logs, s) {
			t.Errorf("a secret is in the agent's log")
		}
	}
	if !strings.Contains(logs, "--port "+strconv.Itoa(port)) {
		t.Error("the command line is not logged")
	}
	if b, _ := os.ReadFile(filepath.Join(e.state, "vllm-7.log")); strings.Contains(string(b), testAPIKey) {
		t.Error("the agent's header line in the vLLM log carries the API key")
	}
}

// Agent fit (acceptance): a recipe needing more VRAM than nvidia-smi shows
// is refused, reported and logged; nothing is launched. A recipe that fits
// on the same box runs.
func TestAgentFitRefusal(t *testing.T) {
	e := newEnv(t)
	smi := e.fakeSMI("0, NVIDIA H100 80GB HBM3, 81559, 81000")
	t.Setenv("PATH", filepath.Dir(smi)+string(os.PathListSeparator)+os.Getenv("PATH"))

	fs := newFleetServer(t)
	bigPort, smallPort := freePort(t), freePort(t)
	big := hfAssignment(1, bigPort)
	big.Recipe.VLLM.VRAMGB = 160
	small := hfAssignment(2, smallPort)
	small.Recipe.VLLM.VRAMGB = 40
	fs.set(big, small)
	cfg := e.config(fs.url())
	cfg.NvidiaSMI = "" // default: nvidia-smi on PATH
	e.start(cfg)

	e.waitRun(smallPort)
	const reason = "model needs 160 GB VRAM, this box has 79.6 GB (1x NVIDIA H100 80GB HBM3)"
	testkit.Eventually(t, "the refusal in a report", func() bool {
		ap, _, ok := fs.applied(1)
		return ok && ap.Revision == "" && ap.Error == reason
	})
	ap, d, _ := fs.applied(2)
	if ap.Revision != fleetapi.Revision(small) || ap.Error != "" {
		t.Errorf("host 2 = %+v, want it running", ap)
	}
	if d.GPU != "1x NVIDIA H100 80GB HBM3" || d.GPUCount != 1 || d.VRAMGB != 79.6 {
		t.Errorf("discovered %+v", d)
	}
	if _, ok := e.record(bigPort); ok {
		t.Error("a vLLM was launched for the refused recipe")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "refusing assignment") || !strings.Contains(logs, reason) || strings.Count(logs, reason) != 1 {
		t.Errorf("the refusal is not logged exactly once:\n%s", logs)
	}
}

// Agent outage (acceptance): (a) the gateway goes away while the agent
// runs: vLLM keeps serving, the agent keeps retrying; (b) a new agent
// started while it is down launches vLLM from the state file; (c) when it
// returns the agent fetches and reports again.
func TestAgentOutage(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	port := freePort(t)
	as := hfAssignment(3, port)
	fs.set(as)
	r1 := e.start(e.config(fs.url()))
	rec := e.waitRun(port)
	testkit.Eventually(t, "a first report", func() bool {
		ap, _, ok := fs.applied(3)
		return ok && ap.Revision == fleetapi.Revision(as)
	})

	// (a)
	fs.stop()
	testkit.Eventually(t, "three failed fetches", func() bool {
		return strings.Count(e.logs.String(), "config fetch failed") >= 3
	})
	if !alive(rec.PID) {
		t.Fatal("vLLM stopped during the outage")
	}
	if code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/health", port), ""); code != 200 {
		t.Fatalf("vLLM /health during the outage = %d", code)
	}

	// (b)
	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
	if alive(rec.PID) {
		t.Fatal("vLLM survived its agent")
	}
	failed := strings.Count(e.logs.String(), "config fetch failed")
	r2 := e.start(e.config(fs.url()))
	rec2 := e.waitRun(port, rec.PID)
	testkit.Eventually(t, "the new agent failing to fetch", func() bool {
		return strings.Count(e.logs.String(), "config fetch failed") > failed
	})
	if !slices.Equal(rec2.Argv, rec.Argv) {
		t.Errorf("argv from the state file = %q, want %q", rec2.Argv, rec.Argv)
	}
	if code, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/health", port), ""); code != 200 {
		t.Fatalf("vLLM /health = %d", code)
	}

	// (c)
	_, reports := fs.counts()
	fs.start()
	testkit.Eventually(t, "a report after the gateway returns", func() bool {
		_, n := fs.counts()
		return n > reports
	})
	if ap, _, _ := fs.applied(3); ap.Revision != fleetapi.Revision(as) || ap.Error != "" {
		t.Errorf("report after the outage = %+v", ap)
	}
	if rec3, _ := e.record(port); rec3.PID != rec2.PID || !alive(rec2.PID) {
		t.Error("vLLM was restarted when the gateway returned with the same revision")
	}
	if !strings.Contains(e.logs.String(), "gateway reachable again") {
		t.Error("no log line for the gateway's return")
	}
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
}

// A new revision without apply keeps the running vLLM (same pid) and
// reports the old revision; apply restarts it with the new args and the
// new revision is reported; auto_apply restarts without apply.
func TestAgentApplySemantics(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	port := freePort(t)
	v1 := hfAssignment(4, port, "--max-model-len", "1024")
	fs.set(v1)
	e.start(e.config(fs.url()))
	rec1 := e.waitRun(port)

	v2 := hfAssignment(4, port, "--max-model-len", "2048")
	fs.set(v2)
	fetches, _ := fs.counts()
	testkit.Eventually(t, "three more fetches and reports", func() bool {
		n, _ := fs.counts()
		return n >= fetches+3
	})
	testkit.Eventually(t, "a report after those fetches", func() bool {
		ap, _, ok := fs.applied(4)
		return ok && ap.Revision == fleetapi.Revision(v1)
	})
	if rec, _ := e.record(port); rec.PID != rec1.PID || !alive(rec1.PID) {
		t.Fatal("vLLM was restarted on a new revision without apply")
	}
	if strings.Count(e.logs.String(), "new revision waits for apply") != 1 {
		t.Error("the pending revision is not logged exactly once")
	}

	v2.Apply = true
	fs.set(v2)
	rec2 := e.waitRun(port, rec1.PID)
	if !slices.Contains(rec2.Argv, "2048") {
		t.Errorf("restarted with %q, want the new args", rec2.Argv)
	}
	if !e.exitedBySIGTERM(rec1.PID) {
		t.Error("the old vLLM was not stopped with SIGTERM")
	}
	testkit.Eventually(t, "the new revision reported and apply cleared", func() bool {
		ap, _, _ := fs.applied(4)
		fs.mu.Lock()
		cleared := !fs.cfg.Assignments[0].Apply
		fs.mu.Unlock()
		return ap.Revision == fleetapi.Revision(v2) && cleared
	})

	v3 := hfAssignment(4, port, "--max-model-len", "8192")
	v3.AutoApply = true
	fs.set(v3)
	rec3 := e.waitRun(port, rec2.PID)
	if !slices.Contains(rec3.Argv, "8192") {
		t.Errorf("auto_apply restarted with %q", rec3.Argv)
	}
	testkit.Eventually(t, "the auto-applied revision reported", func() bool {
		ap, _, _ := fs.applied(4)
		return ap.Revision == fleetapi.Revision(v3)
	})
}

// A host removed from the config has its vLLM stopped, and the next report
// no longer lists it.
func TestAgentStopsRetiredHost(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	p1, p2 := freePort(t), freePort(t)
	fs.set(hfAssignment(5, p1), hfAssignment(6, p2))
	e.start(e.config(fs.url()))
	rec1, rec2 := e.waitRun(p1), e.waitRun(p2)

	fs.set(hfAssignment(6, p2))
	testkit.Eventually(t, "host 5 stopped", func() bool { return !alive(rec1.PID) })
	if !e.exitedBySIGTERM(rec1.PID) {
		t.Error("the retired host's vLLM was not stopped with SIGTERM")
	}
	testkit.Eventually(t, "a report without host 5", func() bool {
		r, _ := fs.lastReport()
		return len(r.Applied) == 1 && r.Applied[0].HostID == 6
	})
	if !alive(rec2.PID) {
		t.Error("the other host's vLLM was stopped")
	}
	if st, _ := loadState(e.state); len(st.Applied) != 1 {
		t.Errorf("state still lists the retired host: %+v", st.Applied)
	}
}

// A vLLM that ignores SIGTERM is killed after the grace period and Run
// still returns.
func TestAgentKillsAfterGrace(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	port := freePort(t)
	fs.set(hfAssignment(8, port, "--fake-ignore-sigterm"))
	cfg := e.config(fs.url())
	cfg.StopGrace = 300 * time.Millisecond
	r := e.start(cfg)
	rec := e.waitRun(port)
	time.Sleep(100 * time.Millisecond) // let the fake install its signal disposition
	start := time.Now()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("Run returned after %v, before the grace period", took)
	}
	if alive(rec.PID) || e.exitedBySIGTERM(rec.PID) {
		t.Error("the vLLM ignoring SIGTERM was not killed")
	}
	if !strings.Contains(e.logs.String(), "did not stop within the grace period") {
		t.Error("the kill is not logged")
	}
}

// A vLLM that dies is restarted with backoff; while it is down the report
// says so.
func TestAgentRestartsCrashedChild(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	port := freePort(t)
	fs.set(hfAssignment(9, port))
	e.start(e.config(fs.url()))
	rec := e.waitRun(port)
	pids := []int{rec.PID}
	for i := 0; i < 3; i++ {
		if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, e.waitRun(port, pids...).PID)
	}
	logs := e.logs.String()
	if strings.Count(logs, "vLLM exited on its own") < 3 {
		t.Error("the crashes are not logged")
	}
	// Backoff doubles: 100ms, 200ms, 400ms.
	for _, d := range []string{"in=100ms", "in=200ms", "in=400ms"} {
		if !strings.Contains(logs, d) {
			t.Errorf("no restart %s in the log", d)
		}
	}
	testkit.Eventually(t, "a report of the restarted vLLM", func() bool {
		ap, _, _ := fs.applied(9)
		return ap.Revision != "" && ap.Error == ""
	})
}

// Weights present locally: no download; vLLM loads the local copy under
// the recipe's served name. Absent: downloaded once, then reused.
func TestAgentURLWeights(t *testing.T) {
	e := newEnv(t)
	var hits atomic.Int32
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("GGUF weights"))
	}))
	defer files.Close()
	fs := newFleetServer(t)

	// Present: the directory already holds the file.
	presentURL := files.URL + "/present/model.gguf?sig=secret-signature"
	dir := filepath.Join(e.models, urlDirName(presentURL))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.gguf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p1 := freePort(t)
	a1 := hfAssignment(10, p1)
	a1.Recipe.VLLM.Model = "tiny-gguf"
	a1.Recipe.VLLM.Source = fleetapi.Source{Kind: fleetapi.SourceURL, URL: presentURL}
	a1.Recipe.VLLM.DiskGB = 1e9 // ignored: nothing to download
	fs.set(a1)
	r := e.start(e.config(fs.url()))
	rec := e.waitRun(p1)
	want := []string{"serve", filepath.Join(dir, "model.gguf"), "--port", strconv.Itoa(p1), "--served-model-name", "tiny-gguf"}
	if !slices.Equal(rec.Argv, want) {
		t.Errorf("argv = %q, want %q", rec.Argv, want)
	}
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/v1/models", p1), testAPIKey); !strings.Contains(body, `"tiny-gguf"`) {
		t.Errorf("served name: %d %s", code, body)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d downloads of present weights", n)
	}

	// Absent: one download, into place, then launched.
	p2 := freePort(t)
	absentURL := files.URL + "/absent/model.gguf"
	a2 := hfAssignment(11, p2)
	a2.Recipe.VLLM.Model = "other-gguf"
	a2.Recipe.VLLM.Source = fleetapi.Source{Kind: fleetapi.SourceURL, URL: absentURL}
	fs.set(a1, a2)
	rec2 := e.waitRun(p2)
	got := filepath.Join(e.models, urlDirName(absentURL), "model.gguf")
	if rec2.Argv[1] != got {
		t.Errorf("loads %q, want %q", rec2.Argv[1], got)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != "GGUF weights" {
		t.Errorf("downloaded %q, %v", b, err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
	if strings.Contains(e.logs.String(), "secret-signature") {
		t.Error("a URL's query is in the log")
	}
}

// A refused fleet key is logged as such, without the key, and retried.
func TestAgentFleetKeyRefused(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	cfg := e.config(fs.url())
	cfg.FleetKey = wrongKey
	r := e.start(cfg)
	testkit.Eventually(t, "two refusals logged", func() bool {
		return strings.Count(e.logs.String(), "fleet key refused") >= 2
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.logs.String(), wrongKey.Reveal()) {
		t.Error("the fleet key is in the log")
	}
}

// The state file survives a restart of the agent and a host whose new
// revision awaits apply restarts on what it ran.
func TestStartupAssignments(t *testing.T) {
	v1 := hfAssignment(1, 9001, "--a")
	v1.Revision = fleetapi.Revision(v1)
	v2 := hfAssignment(1, 9001, "--b")
	v2.Revision = fleetapi.Revision(v2)
	other := hfAssignment(2, 9002)
	other.Revision = fleetapi.Revision(other)
	st := state{Config: &fleetapi.Config{Assignments: []fleetapi.Assignment{v2, other}}, Applied: map[int64]fleetapi.Assignment{1: v1}}
	got := startupAssignments(st)
	if len(got) != 2 || got[0].Revision != v1.Revision || got[1].Revision != other.Revision {
		t.Errorf("pending revision: %+v", got)
	}
	v2.Apply = true
	st.Config.Assignments[0] = v2
	if got := startupAssignments(st); got[0].Revision != v2.Revision {
		t.Errorf("apply set: %+v", got[0])
	}

	// Round trip through the file.
	dir := t.TempDir()
	w := stateWriter{path: filepath.Join(dir, stateFile)}
	if err := w.write(st); err != nil {
		t.Fatal(err)
	}
	back, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(st)
	b2, _ := json.Marshal(back)
	if string(b1) != string(b2) {
		t.Errorf("round trip:\n%s\n%s", b1, b2)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
