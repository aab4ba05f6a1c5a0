package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/testkit"
)

// The tests run every command in-process through Execute against a real
// gateway: rolter serve's own server.Start on a temporary SQLite store,
// listening on a free port. One gateway serves the whole package (the
// golden test starts its own, so that its ids do not depend on which
// tests ran before it).

const adminToken = "tok-FAKE-cli-test-0123456789abcdef"

// gw is the package's gateway, started by TestMain.
var gw *gateway

type gateway struct {
	dir  string
	srv  *server.Server
	url  string
	out  *testkit.Buffer // first-start banner
	logs *testkit.Buffer
}

func startGateway(cfg server.Config) (*gateway, error) {
	g := &gateway{out: &testkit.Buffer{}, logs: &testkit.Buffer{}}
	var err error
	if g.dir, err = os.MkdirTemp("", "rolter-cli-test-"); err != nil {
		return nil, err
	}
	cfg.DataDir, cfg.Listen, cfg.Out = g.dir, "127.0.0.1:0", g.out
	cfg.AdminToken = secret.New(adminToken)
	cfg.ShutdownTimeout = 5 * time.Second
	log := slog.New(slog.NewTextHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g.srv, err = server.Start(context.Background(), cfg, log)
	if err != nil {
		os.RemoveAll(g.dir)
		return nil, err
	}
	g.url = "http://" + g.srv.Addr
	return g, nil
}

// close stops the gateway and removes its store.
func (g *gateway) close() error {
	err := g.srv.Shutdown()
	os.RemoveAll(g.dir)
	return err
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(shared{m})
}

// shared starts the package's gateway around the tests, inside goleak's
// check, so that its goroutines are stopped before the check runs.
type shared struct{ m *testing.M }

func (s shared) Run() int {
	var err error
	// --demo: the simulated upstream lets the usage tests send real
	// requests through the gateway.
	if gw, err = startGateway(server.Config{Demo: true}); err != nil {
		fmt.Fprintln(os.Stderr, "start the gateway:", err)
		return 1
	}
	code := s.m.Run()
	http.DefaultClient.CloseIdleConnections() // chat's connections
	if err := gw.close(); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		code = 1
	}
	return code
}

// result is one command's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cmd describes one invocation: the environment the command sees (not
// the test process's) and its standard input.
type cmd struct {
	env   map[string]string
	stdin string
}

// rolter runs the command line against g with the admin token in the
// environment, as an operator would.
func rolter(t *testing.T, args ...string) result {
	t.Helper()
	return cmd{}.on(t, gw, args...)
}

func (c cmd) on(t *testing.T, g *gateway, args ...string) result {
	t.Helper()
	env := map[string]string{"ROLTER_URL": g.url, "ROLTER_ADMIN_TOKEN": adminToken}
	for k, v := range c.env {
		env[k] = v
	}
	return c.exec(t, env, args...)
}

// exec runs Execute with exactly env as the environment.
func (c cmd) exec(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), args, Env{
		Stdin:  strings.NewReader(c.stdin),
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// must runs a command that has to succeed and returns its stdout.
func must(t *testing.T, args ...string) string {
	t.Helper()
	r := rolter(t, args...)
	if r.code != 0 {
		t.Fatalf("rolter %s: %v", strings.Join(args, " "), r)
	}
	return r.stdout
}

// wantExit runs a command that has to fail with code and returns it.
func wantExit(t *testing.T, code int, args ...string) result {
	t.Helper()
	r := rolter(t, args...)
	if r.code != code {
		t.Fatalf("rolter %s: want exit %d, got %v", strings.Join(args, " "), code, r)
	}
	return r
}

// chat sends one chat completion through the gateway with a virtual key.
func chat(t *testing.T, g *gateway, key, model string) {
	t.Helper()
	body := `{"model": "` + model + `", "messages": [{"role": "user", "content": "hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
}
