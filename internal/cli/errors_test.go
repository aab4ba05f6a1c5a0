package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExitCodes checks one command per class of failure, against the real
// gateway where it can answer and against real listeners where it must
// not: a closed port, a proxy's error page, a server that never answers.
func TestExitCodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	notAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	defer notAPI.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()

	for _, tc := range []struct {
		name string
		env  map[string]string // replaces the gateway's URL and token
		args []string
		code int
		want string // in stderr
	}{
		{"no token", map[string]string{"ROLTER_ADMIN_TOKEN": ""}, []string{"providers", "list"}, ExitAuth, "no admin token"},
		{"wrong token", map[string]string{"ROLTER_ADMIN_TOKEN": "ra-wrong-token-0123456789abcdef"}, []string{"providers", "list"}, ExitAuth, "unauthorized"},
		{"--token wins over the environment", map[string]string{"ROLTER_ADMIN_TOKEN": ""}, []string{"orgs", "get", "default", "--token", adminToken}, ExitOK, ""},
		{"--server wins over ROLTER_URL", nil, []string{"orgs", "list", "--server", closed}, ExitServer, "cannot reach the gateway"},
		{"connection refused", map[string]string{"ROLTER_URL": closed}, []string{"providers", "list"}, ExitServer, "connection refused"},
		{"a proxy's error page", map[string]string{"ROLTER_URL": proxy.URL}, []string{"providers", "list"}, ExitServer, "502 Bad Gateway without an admin API error"},
		{"an answer that is not the API", map[string]string{"ROLTER_URL": notAPI.URL}, []string{"providers", "get", "x"}, ExitServer, "not JSON"},
		{"no answer in time", map[string]string{"ROLTER_URL": hang.URL}, []string{"providers", "list", "--timeout", "300ms"}, ExitServer, "no answer within --timeout 300ms"},
		{"a bad server URL", map[string]string{"ROLTER_URL": "localhost:4000"}, []string{"providers", "list"}, ExitUsage, "want the gateway's base URL"},
		{"an unknown flag", nil, []string{"providers", "list", "--colour"}, ExitUsage, "unknown flag: --colour"},
		{"an unknown command", nil, []string{"providers", "frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"an unknown top-level command", nil, []string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"a missing argument", nil, []string{"providers", "get"}, ExitUsage, "want SLUG"},
		{"a bad output format", nil, []string{"providers", "list", "-o", "xml"}, ExitUsage, `-o "xml"`},
		{"a bad -f file", nil, []string{"providers", "create", "-f", "/nonexistent.yaml"}, ExitUsage, "no such file"},
		{"the API refuses the input", nil, []string{"providers", "create", "--name", "x", "--kind", "colour", "--base-url", "http://127.0.0.1:9/v1"}, ExitUsage, "validation_failed"},
		{"not found", nil, []string{"providers", "get", "nope"}, ExitNotFound, "not_found"},
		{"conflict", nil, []string{"orgs", "create", "--name", "default"}, ExitConflict, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cmd{env: tc.env}.on(t, gw, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("want exit %d and %q in stderr, got %v", tc.code, tc.want, r)
			}
			if r.code != ExitOK && !strings.HasPrefix(r.stderr, "rolter") {
				t.Errorf("the message does not name the command: %q", r.stderr)
			}
		})
	}
	// The fields of a refusal are listed one per line.
	r := wantExit(t, ExitUsage, "providers", "create", "--name", "x", "--kind", "colour", "--base-url", "ftp://x")
	if !strings.Contains(r.stderr, "\n  base_url: ") || !strings.Contains(r.stderr, "\n  kind: ") {
		t.Errorf("fields not listed: %v", r)
	}
	// Without arguments: the help on stderr, exit 2, as before the CLI.
	if r := (cmd{}).exec(t, nil); r.code != ExitUsage || !strings.Contains(r.stderr, "providers") || r.stdout != "" {
		t.Errorf("no arguments: %v", r)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if r := rolter(t, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, "rolter") {
			t.Errorf("completion %s: %v", shell, r)
		}
	}
	// Ids complete from the gateway.
	r := rolter(t, "__complete", "providers", "get", "")
	if r.code != 0 || !strings.Contains(r.stdout, "demo\n") {
		t.Errorf("completing a provider slug: %v", r)
	}
}
