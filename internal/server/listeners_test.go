package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
)

const listenersToken = "tok-FAKE-listeners-0123456789ab"

// get sends one request to base+path and returns the status, the body and
// the request id the answer carries. Redirects are not followed.
func get(t *testing.T, method, base, path, auth, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")
}

// surface is one path of the gateway, and whether the client listener
// serves it when --admin-listen is set (else the admin listener does).
type surface struct {
	method, path string
	client       bool
	auth         string // "admin", "key" or ""
	body         string
}

var surfaces = []surface{
	{"GET", "/healthz", true, "", ""},
	{"GET", "/readyz", true, "", ""},
	{"GET", "/v1/models", true, "key", ""},
	{"GET", "/v1/models/demo", true, "key", ""},
	{"POST", "/v1/chat/completions", true, "key", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`},
	{"POST", "/v1/chat/completions", true, "key", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"GET", "/vllm/config", true, "", ""}, // 401 without a fleet key: served, not 404
	{"GET", "/demo/v1/models", true, "", ""},
	{"GET", "/admin/v1/orgs", false, "admin", ""},
	{"GET", "/admin/v1/orgs", false, "", ""}, // 401
	{"GET", "/ui", false, "", ""},
	{"GET", "/ui/", false, "", ""},
	{"GET", "/metrics", false, "", ""},
}

func (s surface) call(t *testing.T, base, key string) (int, string, string) {
	t.Helper()
	auth := map[string]string{"admin": listenersToken, "key": key}[s.auth]
	return get(t, s.method, base, s.path, auth, s.body)
}

// With --admin-listen, /admin, /ui and /metrics are served only on the
// admin address, and the client address serves only the data path, the
// fleet box endpoints and the health endpoints (docs/observability.md).
func TestAdminListenSplitsSurfaces(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New(listenersToken), AdminListen: "127.0.0.1:0"})
	defer r.srv.Shutdown()
	if r.srv.AdminAddr == r.srv.Addr || r.srv.AdminAddr == "" {
		t.Fatalf("admin address %q, client address %q", r.srv.AdminAddr, r.srv.Addr)
	}
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	client, admin := "http://"+r.srv.Addr, "http://"+r.srv.AdminAddr
	ids := map[string]bool{}
	for _, s := range surfaces {
		home, other := client, admin
		if !s.client {
			home, other = admin, client
		}
		code, body, id := s.call(t, home, key)
		if code == 404 || code >= 500 {
			t.Fatalf("%s %s on its own listener: %d %s", s.method, s.path, code, body)
		}
		if s.path == "/healthz" || s.path == "/readyz" {
			// Both listeners answer health probes.
			if code, _, _ := s.call(t, other, key); code != 200 {
				t.Fatalf("%s on the other listener: %d", s.path, code)
			}
		} else if code, body, _ := s.call(t, other, key); code != 404 {
			t.Fatalf("%s %s on the other listener: %d %s", s.method, s.path, code, body)
		}
		if !strings.HasPrefix(id, "req-") || ids[id] {
			t.Fatalf("%s %s: request id %q", s.method, s.path, id)
		}
		ids[id] = true
	}
	if !strings.Contains(r.logs.String(), "admin_addr="+r.srv.AdminAddr) {
		t.Fatalf("the start line should name the admin address:\n%s", r.logs.String())
	}
	if !strings.Contains(r.out.String(), "http://"+r.srv.AdminAddr+"/ui/") {
		t.Fatalf("the banner should point at the admin listener's UI:\n%s", r.out.String())
	}
}

// Without --admin-listen one listener serves everything, as before.
func TestOneListenerServesEverything(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New(listenersToken)})
	defer r.srv.Shutdown()
	if r.srv.AdminAddr != r.srv.Addr {
		t.Fatalf("admin address %q, client address %q", r.srv.AdminAddr, r.srv.Addr)
	}
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	for _, s := range surfaces {
		code, body, id := s.call(t, "http://"+r.srv.Addr, key)
		if code == 404 || code >= 500 || id == "" {
			t.Fatalf("%s %s: %d (request id %q) %s", s.method, s.path, code, id, body)
		}
	}
}

// A taken --admin-listen address fails the start and releases the client
// listener.
func TestAdminListenTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientAddr := free.Addr().String()
	free.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err = server.Start(context.Background(), server.Config{DataDir: t.TempDir(), Listen: clientAddr,
		AdminListen: taken.Addr().String(), AdminToken: secret.New(listenersToken)}, log)
	if err == nil || !strings.Contains(err.Error(), "--admin-listen") {
		t.Fatalf("start with a taken admin address: %v", err)
	}
	ln, err := net.Listen("tcp", clientAddr)
	if err != nil {
		t.Fatalf("the client address was not released: %v", err)
	}
	ln.Close()
}
