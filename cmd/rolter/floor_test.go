package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/demo"
)

// TestFloorProxiesToItsUpstream runs the bench's floor in front of the demo
// upstream and sends it a non-streamed and a streamed chat request: both
// arrive whole, the stream event by event up to [DONE], with the request's
// headers passed through (the demo is shaped by x-demo-*).
func TestFloorProxiesToItsUpstream(t *testing.T) {
	up := httptest.NewServer(demo.New(demo.Options{}))
	defer up.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- floor(ctx, []string{"--listen", "127.0.0.1:0", "--upstream", up.URL, "--print-addr"}, pw, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("floor returned %v", err)
		}
	}()
	addr, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url := "http://" + strings.TrimSpace(addr) + "/v1/chat/completions"

	for _, stream := range []bool{false, true} {
		body := `{"model":"` + demo.ModelID + `","messages":[{"role":"user","content":"hi"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Demo-Chunks", "7")
		client := &http.Client{Timeout: time.Minute}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream=%v: %d %v: %s", stream, resp.StatusCode, err, b)
		}
		if stream {
			if n := strings.Count(string(b), "data: "); !strings.HasSuffix(string(b), "data: [DONE]\n\n") || n < 9 {
				t.Fatalf("stream: %d events, want 7 chunks, the role, the finish and [DONE]: %s", n, b)
			}
		} else if !strings.Contains(string(b), `"choices"`) {
			t.Fatalf("not a chat answer: %s", b)
		}
	}
}

func TestFloorRefusesABadUpstream(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:80", "ftp://x", "http://"} {
		if err := floor(context.Background(), []string{"--upstream", u}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--upstream") {
			t.Errorf("--upstream %q: %v, want an error naming the flag", u, err)
		}
	}
}
