package anthropic

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"testing"
)

// manyBlocks is an Anthropic request whose one user message holds n empty
// text blocks, the most blocks per byte a request can carry.
func manyBlocks(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":""}`)
	}
	b.WriteString(`]}]}`)
	return b.Bytes()
}

// manyParts is the OpenAI mirror of manyBlocks.
func manyParts(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":""}`)
	}
	b.WriteString(`]}]}`)
	return b.Bytes()
}

// manyMessages is a request of n short messages, which the cap does not
// count: memory must stay linear without it.
func manyMessages(prefix string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(prefix + `"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":""}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// allocated returns the bytes fn allocates (all goroutines; this package's
// tests start none).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestScenario23_MessagesTranslationMemoryCap: a request of MaxBlocks
// blocks translates; one more is refused with the stable code, naming the
// first block over the limit, in both directions.
func TestScenario23_MessagesTranslationMemoryCap(t *testing.T) {
	cases := []struct {
		name string
		tr   func([]byte) ([]byte, error)
		body func(int) []byte
	}{
		{"ToOpenAI", ToOpenAI, manyBlocks},
		{"ToAnthropic", ToAnthropic, manyParts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.tr(c.body(MaxBlocks))
			if err != nil {
				t.Fatalf("%d blocks: %v", MaxBlocks, err)
			}
			if n := bytes.Count(out, []byte(`"type":"text"`)); n != MaxBlocks {
				t.Fatalf("%d blocks in, %d text parts out", MaxBlocks, n)
			}
			_, err = c.tr(c.body(MaxBlocks + 1))
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeTooManyBlocks {
				t.Fatalf("%d blocks: err = %#v, want code %s", MaxBlocks+1, err, CodeTooManyBlocks)
			}
			if want := "messages[0].content[" + strconv.Itoa(MaxBlocks) + "]"; e.Field != want {
				t.Errorf("field = %q, want %q", e.Field, want)
			}
			if !bytes.Contains([]byte(e.Message), []byte(strconv.Itoa(MaxBlocks))) {
				t.Errorf("message %q does not name the limit", e.Message)
			}
		})
	}
	// Blocks add up across messages, system and tool results.
	var b bytes.Buffer
	b.WriteString(`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}`)
	for range MaxBlocks / 1000 {
		b.WriteString(`,{"role":"assistant","content":[`)
		for j := range 1000 {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"text","text":""}`)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	var e *Error
	if _, err := ToOpenAI(b.Bytes()); !errors.As(err, &e) || e.Code != CodeTooManyBlocks || e.Field != "messages[100].content[997]" {
		t.Fatalf("system + tool result + %d: err = %#v", MaxBlocks, err)
	}
}

// TestScenario23_MessagesTranslationMemoryAllocs: translating allocates
// less than four times the body, for the bodies that cost the most per
// byte: blocks just under the cap, a body far over it, and many small
// messages (which the cap does not count). The map-based translation
// allocated about 75 times the body for empty blocks.
func TestScenario23_MessagesTranslationMemoryAllocs(t *testing.T) {
	cases := []struct {
		name string
		tr   func([]byte) ([]byte, error)
		body []byte
		ok   bool
	}{
		{"ToOpenAI/blocks under the cap", ToOpenAI, manyBlocks(MaxBlocks), true},
		{"ToOpenAI/30 MiB of blocks", ToOpenAI, manyBlocks(1_200_000), false},
		{"ToOpenAI/messages", ToOpenAI, manyMessages(`{"model":"m","max_tokens":1,`, 300_000), true},
		{"ToAnthropic/parts under the cap", ToAnthropic, manyParts(MaxBlocks), true},
		{"ToAnthropic/messages", ToAnthropic, manyMessages(`{"model":"m",`, 300_000), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = c.tr(c.body) })
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
			t.Logf("body %d bytes, allocated %d bytes (%.2fx)", len(c.body), n, float64(n)/float64(len(c.body)))
			if n > 4*uint64(len(c.body)) {
				t.Errorf("allocated %d bytes for a %d-byte body: more than 4x", n, len(c.body))
			}
		})
	}
}
