package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// benchBody is a ~2 KB chat request: a system prompt, a few turns, one
// image part, sampling parameters.
var benchBody = func() []byte {
	para := "The gateway forwards OpenAI-compatible requests to self-hosted inference servers, " +
		"checks each route's policy, and keeps every byte of the body it does not own. "
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a concise assistant. " + para},
		map[string]any{"role": "user", "content": "Summarise this design in two sentences: " + para + para},
		map[string]any{"role": "assistant", "content": "It is a thin proxy with router-owned policy. " + para},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "And what does this diagram show? " + para},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/diagram.png"}},
		}},
		map[string]any{"role": "assistant", "content": "<think>The user wants the diagram explained.</think>It shows the request path. " + para},
		map[string]any{"role": "user", "content": "Thanks. " + strings.Repeat("Please expand on the failover rules. ", 9)},
	}
	b, err := json.Marshal(map[string]any{
		"model": "team/llama-3.1-8b", "messages": msgs, "max_tokens": 4096,
		"temperature": 0.7, "top_p": 0.95, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
	})
	if err != nil {
		panic(err)
	}
	return b
}()

func BenchmarkInspect(b *testing.B) {
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(benchBody, "/chat/completions"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspectAdmit: no ceiling, context admission only: the body is
// forwarded as it is.
func BenchmarkInspectAdmit(b *testing.B) {
	p := store.Policy{Tools: "deny", Media: "allow"}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := Inspect(benchBody, "/chat/completions")
		if err != nil {
			b.Fatal(err)
		}
		if _, r := Admit(benchBody, "/chat/completions", req, p, 131072); r != nil {
			b.Fatal(r)
		}
	}
}

// BenchmarkInspectAdmitClamp: the ceiling (1024) is below the client's
// max_tokens (4096), so the body is rewritten: one allocation for it.
func BenchmarkInspectAdmitClamp(b *testing.B) {
	p := store.Policy{MaxOutputTokens: 1024, Tools: "deny", Media: "allow"}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := Inspect(benchBody, "/chat/completions")
		if err != nil {
			b.Fatal(err)
		}
		if _, r := Admit(benchBody, "/chat/completions", req, p, 131072); r != nil {
			b.Fatal(r)
		}
	}
}

// BenchmarkDecode is the baseline Inspect avoids: encoding/json into
// minimal structs.
func BenchmarkDecode(b *testing.B) {
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	var req struct {
		Messages  []msg `json:"messages"`
		MaxTokens int   `json:"max_tokens"`
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		req.Messages = req.Messages[:0]
		if err := json.Unmarshal(benchBody, &req); err != nil {
			b.Fatal(err)
		}
		for _, m := range req.Messages {
			var parts []part
			_ = json.Unmarshal(m.Content, &parts)
		}
	}
}

func TestBenchBody(t *testing.T) {
	if n := len(benchBody); n < 1800 || n > 2600 {
		t.Errorf("bench body is %d bytes, want ~2 KB", n)
	}
	r, err := Inspect(benchBody, "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	if !r.HasMedia || r.HasTools || r.MaxTokens != 4096 || r.PromptLowerBound < 200 {
		t.Errorf("%+v", r)
	}
	t.Logf("%d bytes, %+v", len(benchBody), r)
}

// BenchmarkAdmitClamp is Admit alone on the clamp path: one top-level walk
// to find the limit members, and the rewritten copy.
func BenchmarkAdmitClamp(b *testing.B) {
	p := store.Policy{MaxOutputTokens: 1024}
	req, err := Inspect(benchBody, "/chat/completions")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, r := Admit(benchBody, "/chat/completions", req, p, 131072); r != nil {
			b.Fatal(r)
		}
	}
}
