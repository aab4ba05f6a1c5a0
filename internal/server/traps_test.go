package server_test

import (
	"net"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
)

// Issue 22, the demo and --listen: the demo upstream is registered at the
// address the gateway is bound to, whatever the port (start binds :0, an
// ephemeral port, so each run has another one), and a request through it
// succeeds on every run, the later ones re-pointing the existing provider.
func TestDemoServesOnAnyListenAddress(t *testing.T) {
	dir := t.TempDir()
	var key string
	for i := range 2 {
		r := start(t, server.Config{DataDir: dir, Demo: true})
		if i == 0 {
			key = keyRe.FindStringSubmatch(r.out.String())[1]
		}
		code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
		_ = r.srv.Shutdown()
		if code != 200 || !strings.Contains(body, `"content":"Hello`) {
			t.Fatalf("run %d on %s: demo completion: %d %s", i, r.addr, code, body)
		}
	}
}

// Issue 22 (and STYLE 10, client message ≠ logged error): a connect_error
// names the provider's slug for the client; the upstream URL goes to the
// log and the admin view only.
func TestConnectErrorNamesProviderNotURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // connection refused from now on
	const tok = "tok-FAKE-connect-0123456789ab"
	r := start(t, server.Config{DataDir: t.TempDir(), AdminToken: secret.New(tok)})
	defer r.srv.Shutdown()
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	upstream := "http://" + closed + "/v1"
	for _, c := range []struct{ path, body string }{
		{"/admin/v1/orgs/default/providers", `{"name":"gone-box","kind":"openai","base_url":"` + upstream + `","keys":[{"secret":"sk-FAKE-gone"}]}`},
		{"/admin/v1/orgs/default/projects/default/routes", `{"model":"r","targets":[{"provider":"gone-box","upstream_model":"m"}]}`},
	} {
		if code, body := r.call(t, "POST", c.path, tok, c.body); code != 201 {
			t.Fatalf("POST %s: %d %s", c.path, code, body)
		}
	}
	code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"r","messages":[{"role":"user","content":"hi"}]}`)
	if code != 502 || !strings.Contains(body, "connect_error") || !strings.Contains(body, `provider \"gone-box\"`) {
		t.Fatalf("connect error: %d %s, want 502 naming provider gone-box", code, body)
	}
	if strings.Contains(body, closed) {
		t.Fatalf("the client's error names the upstream address %s: %s", closed, body)
	}
	if !strings.Contains(r.logs.String(), closed) {
		t.Fatalf("the log does not name the upstream address %s:\n%s", closed, r.logs.String())
	}
	if _, view := r.call(t, "GET", "/admin/v1/orgs/default/providers/gone-box", tok, ""); !strings.Contains(view, upstream) {
		t.Fatalf("the admin view does not show the base_url: %s", view)
	}
}
