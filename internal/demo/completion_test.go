package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

type usageBody struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text  *string `json:"text"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageBody `json:"usage"`
}

func TestNonStreamed(t *testing.T) {
	ts := newServer(t, Options{})
	tests := []struct {
		name, path, body string
		object, idPrefix string
		wantText         string
		wantFinish       string
		wantCompletion   int
	}{
		{
			name: "chat", path: "/v1/chat/completions",
			body:   `{"model":"my/served-model","messages":[{"role":"user","content":"hi"}]}`,
			object: "chat.completion", idPrefix: "chatcmpl-demo-",
			wantText: DefaultText, wantFinish: "stop", wantCompletion: DefaultChunks,
		},
		{
			name: "completions", path: "/v1/completions",
			body:   `{"model":"my/served-model","prompt":"Once upon a time","stream":false}`,
			object: "text_completion", idPrefix: "cmpl-demo-",
			wantText: DefaultText, wantFinish: "stop", wantCompletion: DefaultChunks,
		},
		{
			name: "chat max_tokens cuts short", path: "/v1/chat/completions",
			body:   `{"model":"my/served-model","messages":[],"max_tokens":3}`,
			object: "chat.completion", idPrefix: "chatcmpl-demo-",
			wantFinish: "length", wantCompletion: 3,
		},
		{
			name: "chat max_completion_tokens wins", path: "/v1/chat/completions",
			body:   `{"model":"my/served-model","messages":[],"max_tokens":1,"max_completion_tokens":2}`,
			object: "chat.completion", idPrefix: "chatcmpl-demo-",
			wantFinish: "length", wantCompletion: 2,
		},
		{
			name: "max_tokens above chunks is no limit", path: "/v1/completions",
			body:   `{"model":"my/served-model","prompt":"x","max_tokens":1000}`,
			object: "text_completion", idPrefix: "cmpl-demo-",
			wantText: DefaultText, wantFinish: "stop", wantCompletion: DefaultChunks,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Unix()
			resp, raw := do(t, ts, http.MethodPost, tc.path, tc.body, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var got completionBody
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got.ID, tc.idPrefix) {
				t.Errorf("id = %q, want prefix %q", got.ID, tc.idPrefix)
			}
			if _, err := strconv.ParseUint(strings.TrimPrefix(got.ID, tc.idPrefix), 10, 64); err != nil {
				t.Errorf("id %q does not end in a counter", got.ID)
			}
			if got.Object != tc.object || got.Model != "my/served-model" {
				t.Errorf("object, model = %q, %q", got.Object, got.Model)
			}
			if got.Created < before || got.Created > time.Now().Unix() {
				t.Errorf("created = %d, not now", got.Created)
			}
			if len(got.Choices) != 1 {
				t.Fatalf("choices = %d, want 1", len(got.Choices))
			}
			c := got.Choices[0]
			var text string
			if tc.object == "chat.completion" {
				if c.Message == nil || c.Message.Role != "assistant" || c.Text != nil {
					t.Fatalf("choice = %s", raw)
				}
				text = c.Message.Content
			} else {
				if c.Text == nil || c.Message != nil {
					t.Fatalf("choice = %s", raw)
				}
				text = *c.Text
			}
			if tc.wantText != "" && text != tc.wantText {
				t.Errorf("text = %q, want %q", text, tc.wantText)
			}
			if text == "" || !strings.HasPrefix(DefaultText, text) {
				t.Errorf("text %q is not a prefix of the demo text", text)
			}
			if c.FinishReason == nil || *c.FinishReason != tc.wantFinish {
				t.Errorf("finish_reason = %v, want %q", c.FinishReason, tc.wantFinish)
			}
			u := got.Usage
			if u == nil || u.CompletionTokens != tc.wantCompletion || u.PromptTokens < 1 ||
				u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage = %+v, want %d completion tokens", u, tc.wantCompletion)
			}
		})
	}
}

// readSSE parses a whole event stream, failing on anything that is not
// exactly a sequence of "data: <payload>\n\n" events.
func readSSE(t *testing.T, body []byte) []string {
	t.Helper()
	var events []string
	rest := string(body)
	for rest != "" {
		if !strings.HasPrefix(rest, "data: ") {
			t.Fatalf("event does not start with %q: %q", "data: ", rest)
		}
		end := strings.Index(rest, "\n\n")
		if end < 0 {
			t.Fatalf("unterminated event: %q", rest)
		}
		payload := rest[len("data: "):end]
		if strings.Contains(payload, "\n") || payload == "" {
			t.Fatalf("bad event payload %q", payload)
		}
		events = append(events, payload)
		rest = rest[end+2:]
	}
	return events
}

func decodeChunk(t *testing.T, ev string) completionBody {
	t.Helper()
	var c completionBody
	if err := json.Unmarshal([]byte(ev), &c); err != nil {
		t.Fatalf("chunk %q: %v", ev, err)
	}
	return c
}

func TestStreamed(t *testing.T) {
	ts := newServer(t, Options{})
	tests := []struct {
		name         string
		path         string
		includeUsage string // stream_options JSON, "" for none
		chunks       string // x-demo-chunks, "" for default
		wantChunks   int
		wantFullText bool
	}{
		{name: "chat default", path: "/v1/chat/completions", wantChunks: DefaultChunks, wantFullText: true},
		{name: "chat usage", path: "/v1/chat/completions", includeUsage: `{"include_usage":true}`, wantChunks: DefaultChunks, wantFullText: true},
		{name: "chat usage false", path: "/v1/chat/completions", includeUsage: `{"include_usage":false}`, wantChunks: DefaultChunks, wantFullText: true},
		{name: "chat one chunk", path: "/v1/chat/completions", chunks: "1", wantChunks: 1, wantFullText: true},
		{name: "chat three chunks", path: "/v1/chat/completions", chunks: "3", includeUsage: `{"include_usage":true}`, wantChunks: 3, wantFullText: true},
		{name: "chat more chunks than words", path: "/v1/chat/completions", chunks: "100", wantChunks: 100},
		{name: "completions default", path: "/v1/completions", wantChunks: DefaultChunks, wantFullText: true},
		{name: "completions usage", path: "/v1/completions", includeUsage: `{"include_usage":true}`, chunks: "5", wantChunks: 5, wantFullText: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chat := tc.path == "/v1/chat/completions"
			body := `{"model":"echo-me","stream":true,"messages":[{"role":"user","content":"hi"}]`
			if tc.includeUsage != "" {
				body += `,"stream_options":` + tc.includeUsage
			}
			body += "}"
			hdr := map[string]string{}
			if tc.chunks != "" {
				hdr["x-demo-chunks"] = tc.chunks
			}
			resp, raw := do(t, ts, http.MethodPost, tc.path, body, hdr)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q", ct)
			}
			events := readSSE(t, raw)
			if len(events) == 0 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("last event is not [DONE]: %q", events)
			}
			events = events[:len(events)-1]

			wantObject := "text_completion"
			if chat {
				wantObject = "chat.completion.chunk"
			}
			var id string
			var created int64
			for i, ev := range events {
				c := decodeChunk(t, ev)
				if i == 0 {
					id, created = c.ID, c.Created
				}
				if c.ID != id || c.Created != created || c.Object != wantObject || c.Model != "echo-me" {
					t.Fatalf("chunk %d header fields differ: %s", i, ev)
				}
			}

			if chat {
				first := decodeChunk(t, events[0])
				if len(first.Choices) != 1 || first.Choices[0].Delta == nil ||
					first.Choices[0].Delta.Role == nil || *first.Choices[0].Delta.Role != "assistant" ||
					first.Choices[0].Delta.Content == nil || *first.Choices[0].Delta.Content != "" ||
					first.Choices[0].FinishReason != nil || first.Usage != nil {
					t.Fatalf("first chunk is not role-only: %s", events[0])
				}
				events = events[1:]
			}

			wantUsage := strings.Contains(tc.includeUsage, "true")
			wantLen := tc.wantChunks + 1
			if wantUsage {
				wantLen++
			}
			if len(events) != wantLen {
				t.Fatalf("got %d events after the role chunk, want %d: %q", len(events), wantLen, events)
			}

			var text strings.Builder
			for i, ev := range events[:tc.wantChunks] {
				c := decodeChunk(t, ev)
				if len(c.Choices) != 1 || c.Choices[0].FinishReason != nil || c.Usage != nil {
					t.Fatalf("content chunk %d: %s", i, ev)
				}
				var piece string
				if chat {
					d := c.Choices[0].Delta
					if d == nil || d.Role != nil || d.Content == nil {
						t.Fatalf("content chunk %d: %s", i, ev)
					}
					piece = *d.Content
				} else {
					if c.Choices[0].Text == nil {
						t.Fatalf("content chunk %d: %s", i, ev)
					}
					piece = *c.Choices[0].Text
				}
				if piece == "" {
					t.Errorf("content chunk %d is empty", i)
				}
				text.WriteString(piece)
			}
			if tc.wantFullText && text.String() != DefaultText {
				t.Errorf("chunks concatenate to %q, want %q", text.String(), DefaultText)
			}
			if !tc.wantFullText && !strings.HasPrefix(text.String(), DefaultText+" "+DefaultText) {
				t.Errorf("repeated text %q does not repeat the demo text", text.String())
			}

			fin := decodeChunk(t, events[tc.wantChunks])
			if len(fin.Choices) != 1 || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "stop" || fin.Usage != nil {
				t.Fatalf("finish chunk: %s", events[tc.wantChunks])
			}
			if chat {
				if d := fin.Choices[0].Delta; d == nil || d.Role != nil || d.Content != nil {
					t.Errorf("finish chunk delta is not empty: %s", events[tc.wantChunks])
				}
			} else if fin.Choices[0].Text == nil || *fin.Choices[0].Text != "" {
				t.Errorf("finish chunk text is not empty: %s", events[tc.wantChunks])
			}

			if wantUsage {
				u := decodeChunk(t, events[len(events)-1])
				if u.Choices == nil || len(u.Choices) != 0 || u.Usage == nil ||
					u.Usage.CompletionTokens != tc.wantChunks || u.Usage.PromptTokens != max(len(body)/4, 1) ||
					u.Usage.TotalTokens != u.Usage.PromptTokens+u.Usage.CompletionTokens {
					t.Errorf("usage chunk: %s", events[len(events)-1])
				}
				if !strings.Contains(events[len(events)-1], `"choices":[]`) {
					t.Errorf("usage chunk lacks an empty choices array: %s", events[len(events)-1])
				}
			}
		})
	}
}

func TestStreamMaxTokens(t *testing.T) {
	ts := newServer(t, Options{})
	resp, raw := do(t, ts, http.MethodPost, "/v1/chat/completions",
		`{"model":"m","stream":true,"max_tokens":2,"stream_options":{"include_usage":true}}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	events := readSSE(t, raw)
	// role, 2 content, finish, usage, [DONE]
	if len(events) != 6 {
		t.Fatalf("events = %q", events)
	}
	if fin := decodeChunk(t, events[3]); *fin.Choices[0].FinishReason != "length" {
		t.Errorf("finish chunk: %s", events[3])
	}
	if u := decodeChunk(t, events[4]); u.Usage.CompletionTokens != 2 {
		t.Errorf("usage chunk: %s", events[4])
	}
}

func TestOptions(t *testing.T) {
	ts := newServer(t, Options{Text: "alpha beta  gamma\tdelta", Chunks: 3})
	resp, raw := do(t, ts, http.MethodPost, "/v1/completions", `{"model":"m","stream":true}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	events := readSSE(t, raw)
	var pieces []string
	for _, ev := range events[:3] {
		pieces = append(pieces, *decodeChunk(t, ev).Choices[0].Text)
	}
	want := []string{"alpha ", "beta  ", "gamma\tdelta"}
	if strings.Join(pieces, "|") != strings.Join(want, "|") {
		t.Errorf("pieces = %q, want %q", pieces, want)
	}
}

func TestScriptSplit(t *testing.T) {
	for _, text := range []string{DefaultText, "one", "  leading and trailing  ", "ünï cödé 日本語 テキスト"} {
		h := New(Options{Text: text}).(*handler)
		for n := 1; n <= 60; n++ {
			s := h.script(n)
			if len(s.raw) != n || len(s.encoded) != n {
				t.Fatalf("%q n=%d: %d pieces", text, n, len(s.raw))
			}
			for i, p := range s.raw {
				if strings.TrimSpace(p) == "" {
					t.Fatalf("%q n=%d: piece %d is blank", text, n, i)
				}
				var dec string
				if err := json.Unmarshal(s.encoded[i], &dec); err != nil || dec != p {
					t.Fatalf("%q n=%d: piece %d encodes as %s", text, n, i, s.encoded[i])
				}
			}
			if n <= len(h.words) && s.joined != text {
				t.Fatalf("%q n=%d: joined %q", text, n, s.joined)
			}
			if !strings.HasPrefix(s.joined, text) {
				t.Fatalf("%q n=%d: joined %q does not start with the text", text, n, s.joined)
			}
		}
	}
}

// TestClientGoneMidStream checks that a departed client releases the handler
// at once rather than after the remaining delays.
func TestClientGoneMidStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hdr   map[string]string
		read  bool // read the first event before cancelling
		after time.Duration
	}{
		{name: "chunk delay", hdr: map[string]string{"x-demo-chunk-delay-ms": "600000"}, read: true},
		{name: "first byte delay", hdr: map[string]string{"x-demo-first-byte-delay-ms": "600000"}, after: 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned := make(chan struct{})
			inner := New(Options{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(returned)
				inner.ServeHTTP(w, r)
			}))
			defer ts.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resDone := make(chan struct{})
			go func() {
				defer close(resDone)
				resp, err := ts.Client().Do(req)
				if err != nil {
					return // cancelled before headers
				}
				defer resp.Body.Close()
				if tc.read {
					line, err := bufio.NewReader(resp.Body).ReadString('\n')
					if err != nil || !strings.Contains(line, `"role":"assistant"`) {
						t.Errorf("first line %q: %v", line, err)
					}
					cancel()
				}
				_, _ = io.Copy(io.Discard, resp.Body)
			}()
			if !tc.read {
				time.Sleep(tc.after)
				cancel()
			}

			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("handler still running 5s after the client went away")
			}
			<-resDone
		})
	}
}

// discardWriter is the cheapest possible ResponseWriter, so the benchmark
// measures the handler rather than the network or a recorder's buffering.
type discardWriter struct {
	hdr http.Header
	n   int
}

func (d *discardWriter) Header() http.Header         { return d.hdr }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discardWriter) Flush()                      {}

func BenchmarkStreamChat(b *testing.B) {
	h := New(Options{Chunks: 20})
	body := []byte(`{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello there"}]}`)
	rd := bytes.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	w := &discardWriter{hdr: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.hdr)
		w.n = 0
		h.ServeHTTP(w, req)
	}
	if w.n == 0 {
		b.Fatal("nothing written")
	}
	b.SetBytes(int64(w.n))
}
