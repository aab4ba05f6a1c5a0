package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// TestMain runs the tests, or, in a child started by startReplica, one
// gateway (replicas_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain())
	}
	if os.Getenv(boxesEnv) != "" {
		os.Exit(boxesMain())
	}
	goleak.VerifyTestMain(m)
}

type syncBuffer = testkit.Buffer

type run struct {
	srv  *server.Server // nil for a replica in another process
	addr string         // the bound listen address
	out  *syncBuffer
	logs *syncBuffer
}

func start(t *testing.T, cfg server.Config) *run {
	t.Helper()
	r := &run{out: &syncBuffer{}, logs: &syncBuffer{}}
	cfg.Listen, cfg.Out = "127.0.0.1:0", r.out
	cfg.ShutdownTimeout = 5 * time.Second
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	r.srv, r.addr = srv, srv.Addr
	return r
}

var (
	adminRe = regexp.MustCompile(`admin token:\s+(ra-\S+)`)
	keyRe   = regexp.MustCompile(`virtual key:\s+(rk-\S+)`)
)

func (r *run) call(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return r.do(t, method, path, auth, body)
}

// callAuth sends a GET with this Authorization header value as is.
func (r *run) callAuth(t *testing.T, method, path, auth string) (int, string) {
	t.Helper()
	return r.do(t, method, path, auth, "")
}

func (r *run) do(t *testing.T, method, path, auth, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+r.addr+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFirstStartRestartAndPersistence(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		spec, dir := storetest.Spec(t, d)
		cfg := server.Config{Store: spec, DataDir: dir, Demo: true}

		first := start(t, cfg)
		m := adminRe.FindStringSubmatch(first.out.String())
		k := keyRe.FindStringSubmatch(first.out.String())
		if m == nil || k == nil {
			t.Fatalf("first start banner: %q", first.out.String())
		}
		token := m[1]
		if code, _ := first.call(t, "GET", "/readyz", "", ""); code != 200 {
			t.Fatalf("readyz %d", code)
		}
		if code, body := first.call(t, "POST", "/admin/v1/orgs/default/providers", token,
			`{"name":"vLLM Moscow","kind":"vllm","base_url":"http://10.0.0.5:8000/v1","keys":[{"secret":"sk-x"}]}`); code != 201 {
			t.Fatalf("create provider: %d %s", code, body)
		}
		// The banner's secrets never reach the log.
		for _, s := range []string{token, k[1]} {
			if strings.Contains(first.logs.String(), s) {
				t.Fatalf("secret in logs")
			}
		}
		if err := first.srv.Shutdown(); err != nil {
			t.Fatal(err)
		}

		second := start(t, cfg)
		defer second.srv.Shutdown()
		if second.out.String() != "" {
			t.Fatalf("second start printed secrets again: %q", second.out.String())
		}
		// The first token still works; everything created is still there.
		code, body := second.call(t, "GET", "/admin/v1/orgs/default/providers", token, "")
		if code != 200 || !strings.Contains(body, `"slug":"vllm-moscow"`) || !strings.Contains(body, `"slug":"demo"`) {
			t.Fatalf("providers after restart: %d %s", code, body)
		}
		code, body = second.call(t, "GET", "/admin/v1/orgs/default/projects/default/keys", token, "")
		if code != 200 || strings.Count(body, `"name":"first key"`) != 1 {
			t.Fatalf("keys after restart: %d %s", code, body)
		}
		code, body = second.call(t, "GET", "/admin/v1/orgs/default/projects/default/routes/demo", token, "")
		if code != 200 || !strings.Contains(body, `"upstream_model":"demo-model"`) {
			t.Fatalf("demo route: %d %s", code, body)
		}
	})
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true})
	req, _ := http.NewRequest("POST", "http://"+r.srv.Addr+"/demo/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true}`))
	req.Header.Set("x-demo-chunks", "5")
	req.Header.Set("x-demo-chunk-delay-ms", "40")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the stream is in flight
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.srv.Shutdown() }()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("in-flight stream cut: %v %q", err, rest)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// New connections are refused after shutdown.
	if _, err := http.Get("http://" + r.srv.Addr + "/healthz"); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

func TestRunReturnsNilOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Listen: addr, DataDir: t.TempDir()},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // waiting for start-up, not a timing assertion
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

func TestBadStartupInput(t *testing.T) {
	cfgPath := t.TempDir() + "/bad.yml"
	if err := os.WriteFile(cfgPath, []byte("orgs:\n  - name: default\n    colour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]server.Config{
		"unknown store":      {Store: "mysql://x"},
		"config unknown key": {ConfigFile: cfgPath},
		"listen in use":      {Listen: "256.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.DataDir = t.TempDir()
			if cfg.Listen == "" {
				cfg.Listen = "127.0.0.1:0"
			}
			_, err := server.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				t.Fatal("started")
			}
			if name == "config unknown key" && !strings.Contains(err.Error(), "line 3") {
				t.Fatalf("config error does not name the line: %v", err)
			}
		})
	}
}

func TestDemoFollowsListenAddress(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		r := start(t, server.Config{DataDir: dir, Demo: true, AdminToken: secret.New("tok-FAKE-demo-0123456789ab")})
		_, body := r.call(t, "GET", "/admin/v1/orgs/default/providers/demo", "tok-FAKE-demo-0123456789ab", "")
		var p struct {
			BaseURL string `json:"base_url"`
		}
		_ = json.Unmarshal([]byte(body), &p)
		if p.BaseURL != "http://"+r.srv.Addr+"/demo/v1" {
			t.Fatalf("demo base_url %q, listening on %s", p.BaseURL, r.srv.Addr)
		}
		_ = r.srv.Shutdown()
	}
}

// TestDemoServes is the newcomer's first minute: the printed key and model
// "demo" get a completion, streamed or not, through the real gateway.
func TestDemoServes(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true})
	defer r.srv.Shutdown()
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || !strings.Contains(body, `"model":"demo"`) || !strings.Contains(body, `"content":"Hello`) {
		t.Fatalf("demo completion: %d %s", code, body)
	}
	code, body = r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, "demo-model") || strings.Contains(body, `"usage":{`) {
		t.Fatalf("demo stream: %d %s", code, body)
	}
	code, body = r.call(t, "GET", "/v1/models", key, "")
	if code != 200 || !strings.Contains(body, `"id":"demo"`) {
		t.Fatalf("models: %d %s", code, body)
	}
	code, body = r.call(t, "GET", "/metrics", "", "")
	if code != 200 || !strings.Contains(body, `rolter_requests_total{class="",org="default",project="default",provider="demo",route="demo",status="200"} 2`) {
		t.Fatalf("metrics: %d %s", code, body)
	}
	if strings.Contains(body, key) {
		t.Fatal("virtual key in metrics")
	}
}

// TestReadinessShownInAdmin: the demo provider is probed on start and its
// live state appears in the provider view.
func TestReadinessShownInAdmin(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New("tok-FAKE-demo-0123456789ab")})
	defer r.srv.Shutdown()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := r.call(t, "GET", "/admin/v1/orgs/default/providers/demo", "tok-FAKE-demo-0123456789ab", "")
		var p struct {
			Readiness *struct {
				State     string     `json:"state"`
				LastProbe *time.Time `json:"last_probe"`
			} `json:"readiness"`
		}
		_ = json.Unmarshal([]byte(body), &p)
		if p.Readiness != nil && p.Readiness.LastProbe != nil {
			if p.Readiness.State != "ready" {
				t.Fatalf("demo readiness: %s", body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe result after 5s: %s", body)
		}
		time.Sleep(20 * time.Millisecond) // waiting for the first probe, not a timing assertion
	}
}
