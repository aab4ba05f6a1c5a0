package demo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newServer(t testing.TB, o Options) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(New(o))
	t.Cleanup(ts.Close)
	return ts
}

// do sends a request and returns the response with its body fully read.
func do(t testing.TB, ts *httptest.Server, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type errorBody struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    string          `json:"code"`
	} `json:"error"`
}

// checkError asserts an OpenAI error body with the given status and code.
func checkError(t *testing.T, resp *http.Response, body []byte, status int, typ, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	if e.Error.Type != typ || e.Error.Code != code || e.Error.Message == "" || string(e.Error.Param) != "null" {
		t.Errorf("error = %+v (param %s), want type %q code %q, a message and null param", e.Error, e.Error.Param, typ, code)
	}
}

func TestOverrides(t *testing.T) {
	ts := newServer(t, Options{})
	chat := `{"model":"m","messages":[]}`
	for _, tc := range []struct {
		status int
		typ    string
	}{
		{503, "server_error"},
		{500, "server_error"},
		{429, "invalid_request_error"},
	} {
		t.Run("status "+strconv.Itoa(tc.status), func(t *testing.T) {
			for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"} {
				resp, raw := do(t, ts, http.MethodPost, path, chat, map[string]string{"x-demo-status": strconv.Itoa(tc.status)})
				checkError(t, resp, raw, tc.status, tc.typ, "simulated_error")
			}
			resp, raw := do(t, ts, http.MethodGet, "/health", "", map[string]string{"X-Demo-Status": strconv.Itoa(tc.status)})
			checkError(t, resp, raw, tc.status, tc.typ, "simulated_error")
		})
	}

	for _, tc := range []struct{ header, value string }{
		{"x-demo-chunks", "0"},
		{"x-demo-chunks", "-1"},
		{"x-demo-chunks", "abc"},
		{"x-demo-chunks", "10001"},
		{"x-demo-chunk-delay-ms", "-5"},
		{"x-demo-chunk-delay-ms", "1.5"},
		{"x-demo-first-byte-delay-ms", "soon"},
		{"x-demo-first-byte-delay-ms", "99999999"},
		{"x-demo-status", "200"},
		{"x-demo-status", "600"},
		{"x-demo-status", "bad"},
	} {
		t.Run("bad "+tc.header+"="+tc.value, func(t *testing.T) {
			resp, raw := do(t, ts, http.MethodPost, "/v1/chat/completions", chat, map[string]string{tc.header: tc.value})
			checkError(t, resp, raw, http.StatusBadRequest, "invalid_request_error", "invalid_request")
			if !bytes.Contains(raw, []byte(tc.header)) {
				t.Errorf("error does not name the header: %s", raw)
			}
		})
	}

	t.Run("delays", func(t *testing.T) {
		start := time.Now()
		resp, raw := do(t, ts, http.MethodPost, "/v1/chat/completions", `{"model":"m","stream":true}`, map[string]string{
			"x-demo-chunks":              "4",
			"x-demo-chunk-delay-ms":      "10",
			"x-demo-first-byte-delay-ms": "30",
		})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		if el := time.Since(start); el < 70*time.Millisecond {
			t.Errorf("stream took %v, want at least 70ms", el)
		}
		if n := len(readSSE(t, raw)); n != 1+4+1+1 {
			t.Errorf("got %d events", n)
		}
	})
}

func TestBadRequests(t *testing.T) {
	ts := newServer(t, Options{})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"invalid json", http.MethodPost, "/v1/chat/completions", `{"model":`, 400, "invalid_request"},
		{"trailing garbage", http.MethodPost, "/v1/chat/completions", `{"model":"m"} x`, 400, "invalid_request"},
		{"array body", http.MethodPost, "/v1/completions", `[]`, 400, "invalid_request"},
		{"empty body", http.MethodPost, "/v1/completions", ``, 400, "invalid_request"},
		{"missing model", http.MethodPost, "/v1/chat/completions", `{"messages":[]}`, 400, "invalid_request"},
		{"empty model", http.MethodPost, "/v1/completions", `{"model":"","prompt":"x"}`, 400, "invalid_request"},
		{"stream not bool", http.MethodPost, "/v1/chat/completions", `{"model":"m","stream":"yes"}`, 400, "invalid_request"},
		{"zero max_tokens", http.MethodPost, "/v1/chat/completions", `{"model":"m","max_tokens":0}`, 400, "invalid_request"},
		{"embeddings no input", http.MethodPost, "/v1/embeddings", `{"model":"m"}`, 400, "invalid_request"},
		{"embeddings null input", http.MethodPost, "/v1/embeddings", `{"model":"m","input":null}`, 400, "invalid_request"},
		{"embeddings empty array", http.MethodPost, "/v1/embeddings", `{"model":"m","input":[]}`, 400, "invalid_request"},
		{"embeddings number input", http.MethodPost, "/v1/embeddings", `{"model":"m","input":42}`, 400, "invalid_request"},
		{"embeddings mixed array", http.MethodPost, "/v1/embeddings", `{"model":"m","input":["a",1]}`, 400, "invalid_request"},
		{"embeddings bad format", http.MethodPost, "/v1/embeddings", `{"model":"m","input":"a","encoding_format":"int8"}`, 400, "invalid_request"},
		{"embeddings no model", http.MethodPost, "/v1/embeddings", `{"input":"a"}`, 400, "invalid_request"},
		{"unknown path", http.MethodGet, "/v1/nope", ``, 404, "not_found"},
		{"root", http.MethodGet, "/", ``, 404, "not_found"},
		{"unprefixed route", http.MethodPost, "/chat/completions", `{"model":"m"}`, 404, "not_found"},
		{"get chat", http.MethodGet, "/v1/chat/completions", ``, 405, "method_not_allowed"},
		{"post models", http.MethodPost, "/v1/models", `{}`, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := do(t, ts, tc.method, tc.path, tc.body, nil)
			checkError(t, resp, raw, tc.status, "invalid_request_error", tc.code)
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestModelsAndHealth(t *testing.T) {
	ts := newServer(t, Options{})

	resp, raw := do(t, ts, http.MethodGet, "/health", "", nil)
	if resp.StatusCode != http.StatusOK || len(raw) != 0 {
		t.Errorf("health: %d %q", resp.StatusCode, raw)
	}
	resp, _ = do(t, ts, http.MethodHead, "/health", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD health: %d", resp.StatusCode)
	}

	resp, raw = do(t, ts, http.MethodGet, "/v1/models", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("models: %d %s", resp.StatusCode, raw)
	}
	const want = `{"object":"list","data":[{"id":"demo-model","object":"model","created":1735689600,"owned_by":"rolter-demo","max_model_len":8192}]}`
	if string(raw) != want {
		t.Errorf("models = %s, want %s", raw, want)
	}
}
