package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/testkit"
)

// gateway is a real `rolter serve` (SQLite) that can be stopped and started
// again on the same address and data directory.
type gateway struct {
	t    *testing.T
	dir  string
	addr string
	srv  *server.Server
	logs *syncBuffer
}

const e2eAdmin = "ra-e2e-admin-FAKE-0123456"

func (g *gateway) start() {
	g.t.Helper()
	cfg := server.Config{DataDir: g.dir, Listen: g.addr, AdminToken: secret.New(e2eAdmin), ShutdownTimeout: 5 * time.Second}
	cfg.Fleet.Controller.Interval = 50 * time.Millisecond
	cfg.Fleet.Controller.FailAfter = 2
	cfg.Metadata.Interval = 50 * time.Millisecond
	// Liveness is written in batches (fleet.Liveness); the download test
	// waits for a refreshed last_config_fetch.
	cfg.Fleet.Handler.Liveness.Flush = 100 * time.Millisecond
	if g.addr == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	var (
		srv *server.Server
		err error
	)
	// The address was ours a moment ago; the listener may linger briefly.
	for i := 0; i < 50; i++ {
		if srv, err = server.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(g.logs, nil))); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		g.t.Fatalf("start gateway: %v", err)
	}
	g.srv, g.addr = srv, srv.Addr
}

func (g *gateway) stop() {
	if g.srv != nil {
		_ = g.srv.Shutdown()
		g.srv = nil
	}
}

func (g *gateway) call(method, path, auth, body string) (int, string) {
	g.t.Helper()
	req, _ := http.NewRequest(method, "http://"+g.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type hostStatus struct {
	State           string     `json:"state"`
	Revision        string     `json:"revision"`
	AppliedRevision string     `json:"applied_revision"`
	LastConfigFetch *time.Time `json:"last_config_fetch"`
	Discovered      *struct {
		VLLMVersion string `json:"vllm_version"`
	} `json:"discovered"`
}

func (g *gateway) host(id int64) hostStatus {
	g.t.Helper()
	code, body := g.call("GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", id), e2eAdmin, "")
	if code != 200 {
		g.t.Fatalf("get host: %d %s", code, body)
	}
	var h hostStatus
	_ = json.Unmarshal([]byte(body), &h)
	return h
}

func (g *gateway) waitHost(id int64, what string, ok func(hostStatus) bool) hostStatus {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := g.host(id)
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("host %d: waited for %s; it is %+v", id, what, h)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// newGateway starts a real gateway for t, stopped at its end; its log is
// shown when t fails.
func newGateway(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), logs: &syncBuffer{}}
	g.start()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logs.String())
		}
	})
	return g
}

// enroll creates a fleet key and a host on 127.0.0.1:port serving model
// with recipe (JSON) through the admin API, and returns the host's id and
// an agent config for e that fetches from the gateway with that key.
func (g *gateway) enroll(e *env, port int, model, recipe string) (int64, Config) {
	g.t.Helper()
	code, body := g.call("POST", "/admin/v1/orgs/default/fleet-keys", e2eAdmin, `{"name":"box"}`)
	var fk struct{ Secret string }
	if code != 201 || json.Unmarshal([]byte(body), &fk) != nil || fk.Secret == "" {
		g.t.Fatalf("create fleet key: %d %s", code, body)
	}
	code, body = g.call("POST", "/admin/v1/orgs/default/hosts", e2eAdmin, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":%q,"recipe":%s}`, port, model, recipe))
	var created struct{ ID int64 }
	if code != 201 || json.Unmarshal([]byte(body), &created) != nil || created.ID == 0 {
		g.t.Fatalf("create host: %d %s", code, body)
	}
	cfg := e.config("http://" + g.addr)
	cfg.FleetKey = secret.New(fk.Secret)
	return created.ID, cfg
}

// TestAgentWithGateway runs the whole loop against a real `rolter serve`:
// the agent fetches its assignment, launches the fake vLLM, the gateway
// registers it and client requests reach it; the gateway stops, the box
// keeps serving; the gateway returns and the agent re-syncs.
func TestAgentWithGateway(t *testing.T) {
	e := newEnv(t)
	g := &gateway{t: t, dir: t.TempDir(), logs: &syncBuffer{}}
	g.start()
	defer g.stop()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logs.String())
		}
	}()

	_, body := g.call("POST", "/admin/v1/orgs/default/fleet-keys", e2eAdmin, `{"name":"box"}`)
	var fk struct{ Secret string }
	_ = json.Unmarshal([]byte(body), &fk)
	_, body = g.call("POST", "/admin/v1/orgs/default/projects/default/keys", e2eAdmin, `{"name":"client"}`)
	var vk struct{ Secret string }
	_ = json.Unmarshal([]byte(body), &vk)
	port := freePort(t)
	weights := t.TempDir()
	code, body := g.call("POST", "/admin/v1/orgs/default/hosts", e2eAdmin, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","recipe":{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"local","path":%q},"vram_gb":8,"disk_gb":1,"args":["--max-model-len","8192"]}}}`,
		port, weights))
	if code != 201 || fk.Secret == "" || vk.Secret == "" {
		t.Fatalf("setup: %d %s", code, body)
	}
	var created struct{ ID int64 }
	_ = json.Unmarshal([]byte(body), &created)

	cfg := e.config("http://" + g.addr)
	cfg.FleetKey = secret.New(fk.Secret)
	e.start(cfg)

	// The agent applies and reports; the controller sees the box serving.
	g.waitHost(created.ID, "serving with the current revision applied", func(h hostStatus) bool {
		return h.State == "serving" && h.AppliedRevision == h.Revision && h.Discovered != nil
	})
	// The registration reaches the request path once the snapshot is
	// rebuilt and the provider's first readiness probe answered: poll.
	chat := func() (code int, body string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body = g.call("POST", "/v1/chat/completions", vk.Secret, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`)
			if code == 200 || time.Now().After(deadline) {
				return code, body
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	if code, body := chat(); code != 200 || !strings.Contains(body, "served by fake vllm") || !strings.Contains(body, `"model":"qwen3"`) {
		t.Fatalf("request through the gateway: %d %s", code, body)
	}
	pid := e.waitRun(port).PID

	// Gateway outage: the box keeps serving from its local state.
	g.stop()
	time.Sleep(5 * cfg.Interval) // several failed fetches
	direct, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil || direct.StatusCode != 200 {
		t.Fatalf("the box stopped serving during the outage: %v", err)
	}
	direct.Body.Close()
	if got := e.waitRun(port).PID; got != pid {
		t.Fatalf("vLLM restarted during the outage: pid %d -> %d", pid, got)
	}

	// The gateway returns: the agent fetches again, the controller re-asserts
	// the registration, and traffic flows to the same process.
	outage := time.Now()
	g.start()
	g.waitHost(created.ID, "a fetch after the outage", func(h hostStatus) bool {
		return h.LastConfigFetch != nil && h.LastConfigFetch.After(outage) && h.State == "serving"
	})
	if code, body := chat(); code != 200 || !strings.Contains(body, "served by fake vllm") {
		t.Fatalf("request after the outage: %d %s", code, body)
	}
	if got := e.waitRun(port).PID; got != pid {
		t.Fatalf("vLLM restarted on re-sync: pid %d -> %d", pid, got)
	}
}

// Against a real gateway, a box in the middle of a download keeps its
// liveness fresh and the host view shows the download's progress.
func TestAgentDownloadProgressAtGateway(t *testing.T) {
	e := newEnv(t)
	files := &slowFiles{data: bytes.Repeat([]byte("w"), 64<<10), chunk: 16 << 10, gate: make(chan struct{})}
	dl := httptest.NewServer(files)
	defer dl.Close()
	defer close(files.gate)
	g := newGateway(t)
	created, cfg := g.enroll(e, freePort(t), "tiny",
		fmt.Sprintf(`{"vllm":{"model":"tiny","source":{"kind":"url","url":%q},"vram_gb":1,"disk_gb":0.001}}`, dl.URL+"/tiny.gguf"))
	e.start(cfg)

	files.gate <- struct{}{}
	type view struct {
		LastConfigFetch *time.Time         `json:"last_config_fetch"`
		Download        *fleetapi.Download `json:"download"`
		ReportError     string             `json:"report_error"`
	}
	get := func() view {
		_, body := g.call("GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", created), e2eAdmin, "")
		var v view
		_ = json.Unmarshal([]byte(body), &v)
		return v
	}
	var first view
	testkit.Eventually(t, "the host view with the download's progress", func() bool {
		first = get()
		d := first.Download
		return d != nil && d.BytesDone == 16<<10 && d.BytesTotal == 64<<10 && first.LastConfigFetch != nil &&
			strings.Contains(first.ReportError, "downloading weights")
	})
	testkit.Eventually(t, "liveness refreshed during the download", func() bool {
		v := get()
		return v.LastConfigFetch != nil && v.LastConfigFetch.After(*first.LastConfigFetch) && v.Download != nil
	})
}

// Issue 18 §3 and §4 at a real gateway: an agent on a box with one L4
// (fake nvidia-smi) places a kv_cache: auto recipe, calibrates it against
// the fake vLLM's kv-cache lines and relaunches it; the gateway's host view
// shows the fit, the GPU and both kv-cache figures, the relaunch figure
// being exactly the one vLLM asked for.
func TestAgentFitAndKVCacheAtGateway(t *testing.T) {
	e := newEnv(t)
	const want = 2358995846 // what the fake vLLM asks for
	t.Setenv("ROLTER_FAKE_KV_WANT", strconv.Itoa(want))
	smi := e.fakeSMI("0, NVIDIA L4, 24576, 24576")
	g := newGateway(t)
	port := freePort(t)
	id, cfg := g.enroll(e, port, "chat",
		`{"vllm":{"model":"acme/tiny-chat","source":{"kind":"hf"},"vram_gb":12,"disk_gb":0.001,"kv_cache":"auto","args":["--max-model-len","4096"]}}`)
	cfg.NvidiaSMI = smi
	e.start(cfg)

	// The conservative launch, then the calibrated one.
	first := e.waitRun(port)
	second := e.waitRun(port, first.PID)
	if v, _ := fleetapi.FlagValue(second.Argv, "--kv-cache-memory"); v != strconv.Itoa(want) {
		t.Errorf("relaunch --kv-cache-memory = %q, want %d (argv %q)", v, want, second.Argv)
	}

	type view struct {
		State           string            `json:"state"`
		Revision        string            `json:"revision"`
		AppliedRevision string            `json:"applied_revision"`
		Fit             string            `json:"fit"`
		GPUs            []int             `json:"gpus"`
		KVCache         *fleetapi.KVCache `json:"kv_cache"`
		ReportError     string            `json:"report_error"`
		Recipe          struct {
			VLLM struct {
				KVCache string `json:"kv_cache"`
			} `json:"vllm"`
		} `json:"recipe"`
	}
	var v view
	testkit.Eventually(t, "the host view with fit, GPUs and both kv-cache figures", func() bool {
		code, body := g.call("GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", id), e2eAdmin, "")
		v = view{}
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			return false
		}
		kv := v.KVCache
		return v.AppliedRevision != "" && v.AppliedRevision == v.Revision &&
			kv != nil && kv.State == fleetapi.KVCalibrated && kv.Bytes == want
	})
	if v.Fit != fleetapi.FitChecked || !slices.Equal(v.GPUs, []int{0}) {
		t.Errorf("host view fit %q on GPUs %v, want checked on [0]", v.Fit, v.GPUs)
	}
	if v.KVCache.InitialBytes != 3<<29 { // the fake's "Available KV cache memory: 1.5 GiB"
		t.Errorf("host view kv_cache.initial_bytes = %d, want %d", v.KVCache.InitialBytes, int64(3<<29))
	}
	if v.KVCache.Error != "" || v.ReportError != "" {
		t.Errorf("host view reports errors: kv_cache %q, report %q", v.KVCache.Error, v.ReportError)
	}
	if v.Recipe.VLLM.KVCache != fleetapi.KVCacheAuto {
		t.Errorf("host view recipe kv_cache = %q, want auto", v.Recipe.VLLM.KVCache)
	}
	// The controller sees the calibrated vLLM serving.
	g.waitHost(id, "serving with the current revision applied", func(h hostStatus) bool {
		return h.State == "serving" && h.AppliedRevision == h.Revision
	})
}
