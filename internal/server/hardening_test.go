package server_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
)

// TestScenario36_MetricsTokenAndOrgLabels: with a metrics token, /metrics
// answers only to it (any case of "Bearer"); and route series carry org
// and project, so two orgs' routes named alike stay apart.
func TestScenario36_MetricsTokenAndOrgLabels(t *testing.T) {
	const adminTok, metricsTok = "ra-scenario36-admin-FAKE", "metrics-token-scenario36-FAKE"
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New(adminTok), MetricsToken: secret.New(metricsTok)})
	defer r.srv.Shutdown()
	for _, tok := range []string{"", "wrong-token-of-some-length", adminTok} {
		if code, body := r.call(t, "GET", "/metrics", tok, ""); code != 401 || strings.Contains(body, "rolter_") {
			t.Fatalf("token %q: %d %s", tok, code, body)
		}
	}

	// Two orgs, each with a route "qwen3" on its own demo provider.
	demoBase := "http://" + r.srv.Addr + "/demo/v1"
	var keys []string
	for _, org := range []string{"acme", "globex"} {
		admin := func(path, body string) string {
			t.Helper()
			code, out := r.call(t, "POST", "/admin/v1"+path, adminTok, body)
			if code != 201 {
				t.Fatalf("POST %s: %d %s", path, code, out)
			}
			return out
		}
		admin("/orgs", `{"name":"`+org+`"}`)
		admin("/orgs/"+org+"/projects", `{"name":"team"}`)
		admin("/orgs/"+org+"/providers", `{"name":"up","kind":"vllm","base_url":"`+demoBase+`","models":["demo-model"]}`)
		admin("/orgs/"+org+"/projects/team/routes", `{"model":"qwen3","targets":[{"provider":"up","upstream_model":"demo-model"}]}`)
		keys = append(keys, extract(admin("/orgs/"+org+"/projects/team/keys", `{"name":"k"}`), `"secret":"`))
	}
	for i, key := range keys {
		for range i + 1 { // acme once, globex twice
			if code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
				t.Fatalf("org %d: %d %s", i, code, body)
			}
		}
	}
	code, body := r.call(t, "GET", "/metrics", "", "")
	if code != 401 {
		t.Fatalf("no token: %d %s", code, body)
	}
	code, body = r.callAuth(t, "GET", "/metrics", "bearer "+metricsTok)
	if code != 200 {
		t.Fatalf("lowercase bearer: %d %s", code, body)
	}
	for _, want := range []string{
		`rolter_requests_total{class="",org="acme",project="team",provider="up",route="qwen3",status="200"} 1`,
		`rolter_requests_total{class="",org="globex",project="team",provider="up",route="qwen3",status="200"} 2`,
		`rolter_upstream_attempts_total{class="ok",org="acme",provider="up"} 1`,
		`rolter_upstream_attempts_total{class="ok",org="globex",provider="up"} 2`,
		`rolter_request_duration_seconds_count{org="globex",project="team",route="qwen3"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, metricsTok) {
		t.Fatal("the metrics token is in the metrics")
	}
}

// TestScenario24_ClientThatNeverReadsIsCutOff: a client that pipelines
// requests and never reads cannot hold a connection in a blocked write, on
// any endpoint and for any answer (here unauthenticated 401s, written after
// their handler returned): once the client write timeout passes the server
// closes the connection.
func TestScenario24_ClientThatNeverReadsIsCutOff(t *testing.T) {
	const writeTimeout = time.Second
	cfg := server.Config{DataDir: t.TempDir()}
	cfg.Gateway.ClientWriteTimeout = writeTimeout
	r := start(t, cfg)
	defer r.srv.Shutdown()
	c, err := net.Dial("tcp", r.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	stop := make(chan struct{})
	sent := make(chan int, 1)
	var lastOK atomic.Int64 // when the server last took a request
	lastOK.Store(time.Now().UnixNano())
	go func() { // write until the server stops taking requests
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Write(req); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue // the server's buffers are full: keep pushing until it gives up
				}
				return
			}
			lastOK.Store(time.Now().UnixNano())
			n++
		}
	}()
	// The scenario is the client not reading while the server is blocked
	// writing to it: wait until the server has taken no request for three
	// write timeouts (its answers filled the socket buffers and its write
	// has been blocked that long), however long a loaded machine takes to
	// get there, or until it has closed the connection.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Since(time.Unix(0, lastOK.Load())) < 3*writeTimeout && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	n := <-sent
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var buf bytes.Buffer
	_, err = io.Copy(&buf, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("after %d pipelined requests the connection was still open 30 s after the client started reading", n)
	}
	answered := bytes.Count(buf.Bytes(), []byte("HTTP/1.1 401"))
	t.Logf("%d requests pipelined; %d answered (%d bytes) before the server closed the connection", n, answered, buf.Len())
	// A server that never gave up resumes once the client reads and
	// answers every request; one that cut the connection answered only
	// what fitted in the socket buffers.
	if answered > n/2 {
		t.Fatalf("the server answered %d of %d requests: it waited for the client instead of cutting it off", answered, n)
	}
}
