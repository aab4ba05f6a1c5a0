package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/testkit"
)

// The test binary doubles as the fake vLLM: with ROLTER_FAKE_VLLM=1 it
// serves instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("ROLTER_FAKE_VLLM") == "1" {
		os.Exit(fakeVLLM(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

const (
	testFleetKey = "rf-testlookup1_fleet-secret-0123456789"
	testAPIKey   = "vllm-api-key-secret-9876543210"
	fakeVersion  = "0.0.0-fake"
)

// runRecord is what the fake vLLM writes to $ROLTER_FAKE_VLLM_DIR/run-<port>.json
// once it listens.
type runRecord struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// fakeVLLM parses `serve MODEL --port P [args]` with the key in
// VLLM_API_KEY (or --api-key K), serves /health,
// /version and /v1/models (Bearer K), and exits 0 on SIGTERM, leaving
// exit-<pid> behind. --fake-ignore-sigterm makes it ignore SIGTERM.
func fakeVLLM(args []string) int {
	if len(args) < 2 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "fake vllm: usage: serve MODEL --port P --api-key K [args]")
		return 2
	}
	model, rest := args[1], args[2:]
	port, _ := fleetapi.FlagValue(rest, "--port")
	key := os.Getenv("VLLM_API_KEY") // as vLLM reads it
	if k, ok := fleetapi.FlagValue(rest, "--api-key"); ok {
		key = k
	}
	served := model
	if v, ok := fleetapi.FlagValue(rest, "--served-model-name"); ok {
		served = v
	}
	dir := os.Getenv("ROLTER_FAKE_VLLM_DIR")
	term := make(chan os.Signal, 1)
	if _, ok := fleetapi.FlagValue(rest, "--fake-ignore-sigterm"); ok {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	fakeKVLines(rest)
	// Whether HF_TOKEN is set, never its value, goes to vLLM's log.
	if os.Getenv("HF_TOKEN") != "" {
		fmt.Fprintln(os.Stderr, "fake vllm: HF_TOKEN is set")
	} else {
		fmt.Fprintln(os.Stderr, "fake vllm: HF_TOKEN is not set")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake vllm:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"version":%q}`, fakeVersion)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, served)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"served by fake vllm on %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, served, port)
	})
	go func() { _ = http.Serve(ln, mux) }() // returns when the test closes ln
	b, _ := json.Marshal(runRecord{PID: os.Getpid(), Argv: args, Env: os.Environ()})
	tmp := filepath.Join(dir, fmt.Sprintf(".run-%s-%d", port, os.Getpid()))
	if os.WriteFile(tmp, b, 0o600) != nil || os.Rename(tmp, filepath.Join(dir, "run-"+port+".json")) != nil {
		return 1
	}
	fmt.Println("fake vllm serving", served, "on", port)
	fmt.Println("INFO:     Application startup complete.")
	<-term
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("exit-%d", os.Getpid())), []byte("SIGTERM"), 0o600)
	return 0
}

// fakeKVLines prints vLLM's kv-cache lines (vllm/v1/worker/gpu_worker.py)
// when ROLTER_FAKE_KV_WANT holds the byte count it "wants": the available
// memory always, and, launched without --kv-cache-memory and at debug
// level, the suggestion. ROLTER_FAKE_KV_SILENT=1 leaves the suggestion
// out, as a vLLM that does not log it.
func fakeKVLines(args []string) {
	want, err := strconv.ParseInt(os.Getenv("ROLTER_FAKE_KV_WANT"), 10, 64)
	if err != nil {
		return
	}
	const gib = 1 << 30
	if v, ok := fleetapi.FlagValue(args, "--kv-cache-memory"); ok {
		n, _ := strconv.ParseInt(v, 10, 64)
		fmt.Printf("(EngineCore_DP0 pid=%d) INFO 09-25 02:25:49 [gpu_worker.py:625] Available KV cache memory: %.2f GiB\n", os.Getpid(), float64(n)/gib)
		return
	}
	fmt.Printf("(EngineCore_DP0 pid=%d) INFO 09-25 02:25:49 [gpu_worker.py:625] Available KV cache memory: 1.5 GiB\n", os.Getpid())
	if os.Getenv("VLLM_LOGGING_LEVEL") != "DEBUG" || os.Getenv("ROLTER_FAKE_KV_SILENT") == "1" {
		return
	}
	fmt.Printf("(EngineCore_DP0 pid=%d) DEBUG 09-25 02:25:51 [gpu_worker.py:860] Free memory on device (4.95/6.0 GiB) on startup. "+
		"Desired GPU memory utilization is (0.79, 4.74 GiB). Actual usage is 2.1 GiB for weight, 0.22 GiB for peak activation, "+
		"0.01 GiB for non-torch memory, and 0.07 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "+
		"`--kv-cache-memory=%d` (%.2f GiB) to fit into requested memory, or `--kv-cache-memory=%d` (%.2f GiB) to fully "+
		"utilize gpu memory. Current kv cache memory in use is 1.5 GiB.\n", os.Getpid(), want, float64(want)/gib, want+1<<28, float64(want+1<<28)/gib)
}

// fleetServer is the gateway's side of the contract: it serves a config,
// checks the fleet key, records reports and, like the gateway, clears Apply
// once a report shows the current revision. stop and start simulate an
// outage on a fixed address.
type fleetServer struct {
	t    *testing.T
	addr string

	mu      sync.Mutex
	srv     *httptest.Server
	cfg     fleetapi.Config
	reports []fleetapi.Report
	fetches int
	// closing counts the fetches that asked to close their connection.
	closing int
	// legacy makes it a gateway from before issue 18: it refuses a report
	// with a field it does not know, as ParseReport does.
	legacy bool
	// old makes it a gateway older than applied[].download: a report
	// with the field is refused, as the real one refuses unknown fields.
	old     bool
	refused int
}

func newFleetServer(t *testing.T) *fleetServer {
	f := &fleetServer{t: t, cfg: fleetapi.Config{IP: "127.0.0.1", Assignments: []fleetapi.Assignment{}}}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *fleetServer) url() string { return "http://" + f.addr }

func (f *fleetServer) start() {
	f.t.Helper()
	addr := f.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment after stop
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("fleet server: %v", err)
	}
	f.addr = ln.Addr().String()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
}

func (f *fleetServer) stop() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

func (f *fleetServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testFleetKey {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == fleetapi.ConfigPath:
		f.fetches++
		if r.Close {
			f.closing++
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f.cfg)
	case r.Method == http.MethodPost && r.URL.Path == fleetapi.ReportPath:
		body, _ := io.ReadAll(r.Body)
		if f.legacy {
			var old struct {
				Applied []struct {
					HostID   int64  `json:"host_id"`
					Revision string `json:"revision"`
					Error    string `json:"error"`
				} `json:"applied"`
				Discovered fleetapi.Discovered `json:"discovered"`
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if dec.Decode(&old) != nil {
				f.refused++
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":"invalid_report","message":"the report is invalid; nothing was recorded","fields":{"applied[0].fit":"unknown field"}}}`)
				return
			}
		}
		if f.old && bytes.Contains(body, []byte(`"download":`)) {
			f.refused++
			http.Error(w, `{"error":{"code":"invalid_report","fields":{"applied[0].download":"unknown field"}}}`, http.StatusBadRequest)
			return
		}
		var rep fleetapi.Report
		if err := json.Unmarshal(body, &rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.reports = append(f.reports, rep)
		for _, ap := range rep.Applied {
			for i := range f.cfg.Assignments {
				if a := &f.cfg.Assignments[i]; a.HostID == ap.HostID && a.Revision == ap.Revision {
					a.Apply = false
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// set replaces the assignments, computing their revisions.
func (f *fleetServer) set(as ...fleetapi.Assignment) {
	for i := range as {
		as[i].Revision = fleetapi.Revision(as[i])
	}
	f.mu.Lock()
	f.cfg.Assignments = as
	f.mu.Unlock()
}

func (f *fleetServer) counts() (fetches, reports int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches, len(f.reports)
}

func (f *fleetServer) lastReport() (fleetapi.Report, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports) == 0 {
		return fleetapi.Report{}, false
	}
	return f.reports[len(f.reports)-1], true
}

// applied returns the last report's entry for host.
func (f *fleetServer) applied(host int64) (fleetapi.Applied, fleetapi.Discovered, bool) {
	r, ok := f.lastReport()
	if !ok {
		return fleetapi.Applied{}, fleetapi.Discovered{}, false
	}
	for _, ap := range r.Applied {
		if ap.HostID == host {
			return ap, r.Discovered, true
		}
	}
	return fleetapi.Applied{}, r.Discovered, false
}

type syncBuffer = testkit.Buffer

// env is the fake vLLM's world for one test.
type env struct {
	t       *testing.T
	runDir  string // run and exit records of fake vLLMs
	state   string
	models  string
	hfHome  string
	noSMI   string
	smiData string // the fake nvidia-smi's output (fakeSMI)
	logs    *syncBuffer
	logger  *slog.Logger
	command []string
	// reportEvery, when set, shortens the agents' report heartbeat.
	reportEvery time.Duration
	// diskFree, when set, stands for the models directory's free space.
	diskFree func(string) (uint64, error)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		t:       t,
		runDir:  t.TempDir(),
		state:   t.TempDir(),
		hfHome:  t.TempDir(),
		noSMI:   "rolter-test-no-such-nvidia-smi",
		logs:    &syncBuffer{},
		command: []string{os.Args[0]},
	}
	e.models = filepath.Join(e.state, "models")
	e.logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Setenv("ROLTER_FAKE_VLLM", "1")
	t.Setenv("ROLTER_FAKE_VLLM_DIR", e.runDir)
	t.Setenv("HF_HOME", e.hfHome)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("ROLTER_FLEET_KEY", testFleetKey) // must not reach vLLM
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", e.logs.String())
		}
	})
	return e
}

func (e *env) config(server string) Config {
	return Config{
		Server:    server,
		FleetKey:  secret.New(testFleetKey),
		StateDir:  e.state,
		Command:   e.command,
		Interval:  100 * time.Millisecond,
		NvidiaSMI: e.noSMI,
		StopGrace: 5 * time.Second,
		Log:       e.logger,
	}
}

// fakeSMI installs a fake nvidia-smi named nvidia-smi in a directory of
// its own and returns its path. It answers the agent's query (and fails
// on any other) with the lines of gpus ("index, name, total MiB, free
// MiB"); setGPUs changes them while the agent runs, e.g. to take memory
// away as another process would.
func (e *env) fakeSMI(gpus string) string {
	e.t.Helper()
	bin := e.t.TempDir()
	e.smiData = filepath.Join(bin, "gpus.csv")
	script := `#!/bin/sh
if [ "$1" != "--query-gpu=index,name,memory.total,memory.free" ] || [ "$2" != "--format=csv,noheader,nounits" ]; then
  echo "unexpected arguments: $*" >&2; exit 2
fi
cat "` + e.smiData + `"
`
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil { //nolint:gosec // G306: an executable
		e.t.Fatal(err)
	}
	e.setGPUs(gpus)
	return filepath.Join(bin, "nvidia-smi")
}

func (e *env) setGPUs(gpus string) {
	e.t.Helper()
	tmp := e.smiData + ".tmp"
	if err := os.WriteFile(tmp, []byte(gpus+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.smiData); err != nil {
		e.t.Fatal(err)
	}
}

// running is an agent whose Run is in progress.
type running struct {
	t      *testing.T
	a      *Agent
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (e *env) start(cfg Config) *running {
	e.t.Helper()
	a, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	a.restartMin, a.restartMax = 100*time.Millisecond, time.Second
	if e.reportEvery > 0 {
		a.reportEvery = e.reportEvery
	}
	if e.diskFree != nil {
		a.diskFree = e.diskFree
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: e.t, a: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	e.t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop cancels Run (the SIGTERM path) and waits for it.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(30 * time.Second):
			r.err = errors.New("Run did not return within 30s of cancel")
			r.t.Error(r.err)
		}
	})
	return r.err
}

// record reads the run record of the fake vLLM on port.
func (e *env) record(port int) (runRecord, bool) {
	b, err := os.ReadFile(filepath.Join(e.runDir, "run-"+strconv.Itoa(port)+".json"))
	if err != nil {
		return runRecord{}, false
	}
	var r runRecord
	if json.Unmarshal(b, &r) != nil {
		return runRecord{}, false
	}
	return r, true
}

// waitRun waits for a fake vLLM on port whose pid is not in not, that
// still lives.
func (e *env) waitRun(port int, not ...int) runRecord {
	e.t.Helper()
	var rec runRecord
	testkit.Eventually(e.t, fmt.Sprintf("a fake vLLM on port %d (not pid %v)", port, not), func() bool {
		r, ok := e.record(port)
		if !ok || r.PID == 0 || !alive(r.PID) {
			return false
		}
		for _, p := range not {
			if r.PID == p {
				return false
			}
		}
		rec = r
		return true
	})
	return rec
}

// exitedBySIGTERM reports whether the fake vLLM pid left its SIGTERM mark.
func (e *env) exitedBySIGTERM(pid int) bool {
	b, err := os.ReadFile(filepath.Join(e.runDir, fmt.Sprintf("exit-%d", pid)))
	return err == nil && string(b) == "SIGTERM"
}

// alive reports whether pid is a live process (a zombie counts as dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// hfAssignment is an assignment of an hf model that is not on the box
// (vLLM would download it; the fake does not care).
func hfAssignment(host int64, port int, args ...string) fleetapi.Assignment {
	return fleetapi.Assignment{
		HostID:    host,
		ModelName: "chat",
		Port:      port,
		APIKey:    testAPIKey,
		Recipe: fleetapi.Recipe{VLLM: &fleetapi.VLLM{
			Model:  "acme/tiny-chat",
			Source: fleetapi.Source{Kind: fleetapi.SourceHF},
			VRAMGB: 16,
			DiskGB: 0.001,
			Args:   args,
		}},
	}
}

// get fetches url with an optional bearer token and returns status and body.
func get(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

var wrongKey = secret.New("rf-wronglookup_not-the-fleet-key-0000")
