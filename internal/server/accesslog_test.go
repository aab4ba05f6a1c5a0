package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

// A handler's panic is answered with a 500 in the client's API shape and
// the request id, logged with its stack under that id; a panic after the
// answer began cuts the connection, so the client sees it incomplete.
func TestPanicsAnsweredWithRequestID(t *testing.T) {
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mux := http.NewServeMux()
	boom := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream") // set, never sent
		panic("boom in " + r.URL.Path)
	}
	mux.HandleFunc("/v1/chat/completions", boom)
	mux.HandleFunc("/v1/messages", boom)
	mux.HandleFunc("/admin/v1/orgs", boom)
	mux.HandleFunc("/v1/stream", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		panic("boom mid-stream")
	})
	srv := httptest.NewServer(accessLog(log, mux))
	defer srv.Close()

	call := func(path string) (*http.Response, string, error) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("X-Request-Id", "client-"+strings.ReplaceAll(path, "/", "-"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, rerr := io.ReadAll(resp.Body)
		return resp, string(b), rerr
	}
	for _, c := range []struct{ path, shape string }{
		{"/v1/chat/completions", "openai"},
		{"/v1/messages", "anthropic"},
		{"/admin/v1/orgs", "text"},
	} {
		resp, body, err := call(c.path)
		want := "client-" + strings.ReplaceAll(c.path, "/", "-")
		if err != nil || resp.StatusCode != 500 || resp.Header.Get("X-Request-Id") != want {
			t.Fatalf("%s: %v %d id %q: %s", c.path, err, resp.StatusCode, resp.Header.Get("X-Request-Id"), body)
		}
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
				Code string `json:"code"`
			} `json:"error"`
		}
		jerr := json.Unmarshal([]byte(body), &e)
		switch c.shape {
		case "openai":
			if jerr != nil || e.Error.Code != "internal_error" || e.Error.Type != "api_error" || e.Type != "" {
				t.Fatalf("%s: %s", c.path, body)
			}
		case "anthropic":
			if jerr != nil || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Code != "internal_error" {
				t.Fatalf("%s: %s", c.path, body)
			}
		case "text":
			if jerr == nil || !strings.Contains(body, "internal error") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Fatalf("%s: %q %s", c.path, resp.Header.Get("Content-Type"), body)
			}
		}
		if strings.Contains(body, "boom") {
			t.Fatalf("%s: the panic reached the client: %s", c.path, body)
		}
		if !strings.Contains(logs.String(), `msg="panic while serving a request" request_id=`+want) ||
			!strings.Contains(logs.String(), `path=`+c.path+` status=500`) {
			t.Fatalf("%s: log:\n%s", c.path, logs.String())
		}
	}
	resp, body, err := call("/v1/stream")
	if err == nil || resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "client--v1-stream" || body != "data: {}\n\n" {
		t.Fatalf("a panic mid-stream must cut the answer: %v %d %q", err, resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "boom mid-stream") || !strings.Contains(logs.String(), "stack=") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// Successful health probes log at debug; failed ones and every other
// request at info.
func TestHealthProbesLogAtDebug(t *testing.T) {
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := true
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			w.WriteHeader(503)
		}
	})
	mux.HandleFunc("/v1/models", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(accessLog(log, mux))
	defer srv.Close()
	for _, p := range []string{"/healthz", "/readyz", "/v1/models"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ready = false // the server has answered: no request is in flight
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Level     string `json:"level"`
			Path      string `json:"path"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if !strings.HasPrefix(l.RequestID, "req-") {
			t.Fatalf("no request id: %s", line)
		}
		got = append(got, l.Level+" "+l.Path)
	}
	want := "DEBUG /healthz,DEBUG /readyz,INFO /v1/models,INFO /readyz"
	if strings.Join(got, ",") != want {
		t.Fatalf("levels: %v, want %s", got, want)
	}
}
