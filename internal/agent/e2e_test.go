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
	g := &gateway{t: t, dir: t.TempDir(), logs: &syncBuffer{}}
	g.start()
	defer g.stop()
	_, body := g.call("POST", "/admin/v1/orgs/default/fleet-keys", e2eAdmin, `{"name":"box"}`)
	var fk struct{ Secret string }
	_ = json.Unmarshal([]byte(body), &fk)
	code, body := g.call("POST", "/admin/v1/orgs/default/hosts", e2eAdmin, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"tiny","recipe":{"vllm":{"model":"tiny","source":{"kind":"url","url":%q},"vram_gb":1,"disk_gb":0.001}}}`,
		freePort(t), dl.URL+"/tiny.gguf"))
	if code != 201 || fk.Secret == "" {
		t.Fatalf("setup: %d %s", code, body)
	}
	var created struct{ ID int64 }
	_ = json.Unmarshal([]byte(body), &created)
	cfg := e.config("http://" + g.addr)
	cfg.FleetKey = secret.New(fk.Secret)
	e.start(cfg)

	files.gate <- struct{}{}
	type view struct {
		LastConfigFetch *time.Time         `json:"last_config_fetch"`
		Download        *fleetapi.Download `json:"download"`
		ReportError     string             `json:"report_error"`
	}
	get := func() view {
		_, body := g.call("GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", created.ID), e2eAdmin, "")
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
