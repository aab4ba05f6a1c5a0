package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/anthropic"
	"github.com/rolter/rolter/internal/store"
)

// heapPeak samples the live heap until stop is called, and returns the
// peak above the heap at the start.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		max := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > max {
				max = v
			}
			select {
			case <-done:
				peak <- max - base
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-peak }
}

// emptyBlocks is a Messages request whose one user message holds n empty
// text blocks: the most blocks per byte of body.
func emptyBlocks(n int) string {
	var b strings.Builder
	b.Grow(70 + 26*n)
	b.WriteString(`{"model":"qwen3","max_tokens":10,"messages":[{"role":"user","content":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":""}`)
	}
	b.WriteString(`]}]}`)
	return b.String()
}

// TestScenario23_MessagesTranslationMemory: a 30 MiB Messages body of 1.2
// million empty text blocks, sent to a route whose target speaks the OpenAI
// API, once took the heap from 6 MB to 949 MB and 37 s of CPU in
// translation. It is now refused with a 400 in Anthropic's error shape
// before any upstream is called, with the heap well under 150 MB above
// where it started; a request of just MaxBlocks blocks still reaches the
// upstream, translated.
func TestScenario23_MessagesTranslationMemory(t *testing.T) {
	h := newHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	pid := h.provider("vllm", up.base(), store.ProviderSettings{}, "sk-vllm")
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})

	t.Run("30 MiB of blocks", func(t *testing.T) {
		body := emptyBlocks(1_200_000)
		stop := heapPeak()
		start := time.Now()
		resp := h.post("/v1/messages", body, "anthropic-version", "2023-06-01")
		got := readAll(t, resp)
		took, peak := time.Since(start), stop()
		t.Logf("%d-byte body: answered %d in %v, heap peak %.1f MB above the start", len(body), resp.StatusCode, took, float64(peak)/1e6)

		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message, Code string }
		}
		if err := json.Unmarshal([]byte(got), &e); err != nil || resp.StatusCode != http.StatusBadRequest ||
			e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Code != anthropic.CodeTooManyBlocks ||
			!strings.Contains(e.Error.Message, strconv.Itoa(anthropic.MaxBlocks)) {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		if up.count() != 0 {
			t.Fatalf("the upstream was called %d times for a refused request", up.count())
		}
		if peak > 150<<20 {
			t.Errorf("heap peaked %d MB above the start, want under 150 MB", peak>>20)
		}
		if took > 30*time.Second { // 2 s is the target; this bound only catches the old behaviour on a loaded machine
			t.Errorf("took %v", took)
		}
	})

	t.Run("just under the cap", func(t *testing.T) {
		body := emptyBlocks(anthropic.MaxBlocks)
		stop := heapPeak()
		start := time.Now()
		resp := h.post("/v1/messages", body, "anthropic-version", "2023-06-01")
		got := readAll(t, resp)
		took, peak := time.Since(start), stop()
		t.Logf("%d-byte body: answered %d in %v, heap peak %.1f MB above the start", len(body), resp.StatusCode, took, float64(peak)/1e6)
		if resp.StatusCode != http.StatusOK || !strings.Contains(got, `"type":"message"`) {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		sent, _ := up.last()
		if n := strings.Count(sent, `{"text":"","type":"text"}`); n != anthropic.MaxBlocks || !strings.Contains(sent, `"model":"Qwen/Qwen3-8B"`) {
			t.Fatalf("the upstream got %d text parts (model in body: %v)", n, strings.Contains(sent, "Qwen/Qwen3-8B"))
		}
	})
}
