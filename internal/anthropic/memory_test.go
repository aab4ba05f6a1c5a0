package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
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

// repeat is n copies of s joined by sep.
func repeat(s, sep string, n int) string {
	if n == 0 {
		return ""
	}
	return strings.Repeat(s+sep, n-1) + s
}

// TestScenario23_MessagesTranslationMemoryAnyInput: translating allocates
// less than four times the body whatever it holds, in both directions:
// text that grows on output (invalid UTF-8 triples as U+FFFD; U+2028 and
// U+2029 double as escapes), escapes that shrink, tool input and arguments
// read as JSON inside a string, deep nesting, the most blocks and messages
// per byte, and bodies refused after a long walk (which allocate nothing
// for their output). Before the output was sized by a counting run, a body
// of invalid UTF-8 cost about 7x (decoded copy, then a doubling buffer)
// and in a tool input 10x (each byte escaped as \ufffd), and a refused
// body cost its size in output buffer.
func TestScenario23_MessagesTranslationMemoryAnyInput(t *testing.T) {
	const mib = 1 << 20
	invalid := strings.Repeat("\xff", 3*mib)
	surrogates := strings.Repeat(`\ud800`, mib/2)
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	deep := repeat(nested(9_000), ",", 200) // 3.4 MiB, 9,001 deep
	const (
		anthropicHead = `{"model":"m","max_tokens":1,"messages":[`
		openAIHead    = `{"model":"m","messages":[`
	)
	cases := []struct {
		name string
		tr   func([]byte) ([]byte, error)
		body string
		ok   bool
	}{
		{"ToOpenAI/invalid UTF-8 text", ToOpenAI,
			anthropicHead + `{"role":"user","content":"` + invalid + `"}]}`, true},
		{"ToOpenAI/invalid UTF-8 in text blocks", ToOpenAI,
			anthropicHead + `{"role":"user","content":[` + repeat(`{"type":"text","text":"`+strings.Repeat("\xfe", 60)+`"}`, ",", 40_000) + `]}]}`, true},
		{"ToOpenAI/invalid UTF-8 in tool input", ToOpenAI,
			anthropicHead + `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{"x":"` + invalid + `"}}]}]}`, true},
		{"ToOpenAI/invalid UTF-8 in a data URL", ToOpenAI,
			anthropicHead + `{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"` + invalid[:mib] + `","data":"` + invalid[mib:] + `"}}]}]}`, true},
		{"ToOpenAI/U+2028 text", ToOpenAI,
			anthropicHead + `{"role":"user","content":"` + strings.Repeat("\u2028", mib) + `"}]}`, true},
		{"ToOpenAI/lone surrogate escapes", ToOpenAI,
			anthropicHead + `{"role":"user","content":"` + surrogates + `"}]}`, true},
		{"ToOpenAI/lone surrogates in system blocks", ToOpenAI,
			`{"model":"m","max_tokens":1,"messages":[],"system":[` + repeat(`{"type":"text","text":"\udc00"}`, ",", MaxBlocks) + `]}`, true},
		{"ToOpenAI/blocks under the cap", ToOpenAI, string(manyBlocks(MaxBlocks - 1)), true},
		{"ToOpenAI/empty tool_use blocks", ToOpenAI,
			anthropicHead + `{"role":"assistant","content":[` + repeat(`{"type":"tool_use","id":"","name":""}`, ",", MaxBlocks-1) + `]}]}`, true},
		{"ToOpenAI/tool_use blocks with empty input", ToOpenAI,
			anthropicHead + `{"role":"assistant","content":[` + repeat(`{"type":"tool_use","id":"","name":"","input":{}}`, ",", MaxBlocks-1) + `]}]}`, true},
		{"ToOpenAI/tool results", ToOpenAI,
			anthropicHead + `{"role":"user","content":[` + repeat(`{"type":"tool_result","tool_use_id":"","is_error":true}`, ",", MaxBlocks-1) + `]}]}`, true},
		{"ToOpenAI/short messages", ToOpenAI, string(manyMessages(`{"model":"m","max_tokens":1,`, 300_000)), true},
		{"ToOpenAI/deep tool input", ToOpenAI,
			anthropicHead + `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{"x":[` + deep + `]}}]}]}`, true},
		{"ToOpenAI/long number", ToOpenAI,
			anthropicHead + `],"temperature":0.` + strings.Repeat("1", 3*mib) + `}`, true},
		{"ToOpenAI/1 million blocks, refused", ToOpenAI, string(manyBlocks(1_000_000)), false},
		{"ToOpenAI/invalid UTF-8 type, refused", ToOpenAI,
			anthropicHead + `{"role":"user","content":[{"type":"` + invalid + `"}]}]}`, false},
		{"ToOpenAI/repeated unknown keys, refused", ToOpenAI,
			`{"model":"m","max_tokens":1,"messages":[],` + repeat(`"\u00ff":1`, ",", 300_000) + `}`, false},
		{"ToOpenAI/long invalid UTF-8 key, refused", ToOpenAI,
			`{"model":"m","max_tokens":1,"messages":[],"` + invalid + `":1}`, false},

		{"ToAnthropic/invalid UTF-8 text", ToAnthropic,
			openAIHead + `{"role":"user","content":"` + invalid + `"}]}`, true},
		{"ToAnthropic/invalid UTF-8 system", ToAnthropic,
			openAIHead + `{"role":"system","content":"` + invalid + `"},{"role":"user","content":"x"}]}`, true},
		{"ToAnthropic/invalid UTF-8 in arguments", ToAnthropic,
			openAIHead + `{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\":\"` + invalid + `\"}"}}]}]}`, true},
		{"ToAnthropic/invalid UTF-8 in a data URL", ToAnthropic,
			openAIHead + `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:` + invalid[:mib] + `;base64,` + invalid[mib:] + `"}}]}]}`, true},
		{"ToAnthropic/lone surrogate escapes", ToAnthropic,
			openAIHead + `{"role":"user","content":"` + surrogates + `"}]}`, true},
		{"ToAnthropic/lone surrogates in arguments", ToAnthropic,
			openAIHead + `{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\":\"` + surrogates + `\"}"}}]}]}`, true},
		{"ToAnthropic/parts under the cap", ToAnthropic, string(manyParts(MaxBlocks - 1)), true},
		{"ToAnthropic/tool calls with empty arguments", ToAnthropic,
			openAIHead + `{"role":"assistant","tool_calls":[` + repeat(`{"id":"","function":{"name":"","arguments":""}}`, ",", MaxBlocks-1) + `]}]}`, true},
		{"ToAnthropic/short messages", ToAnthropic, string(manyMessages(`{"model":"m",`, 300_000)), true},
		{"ToAnthropic/short tool messages", ToAnthropic,
			openAIHead + repeat(`{"role":"tool","tool_call_id":""}`, ",", 200_000) + `]}`, true},
		{"ToAnthropic/short system messages", ToAnthropic,
			openAIHead + repeat(`{"role":"system","content":""}`, ",", 200_000) + `,{"role":"user","content":""}]}`, true},
		{"ToAnthropic/deep arguments", ToAnthropic,
			openAIHead + `{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\":[` + deep + `]}"}}]}]}`, true},
		{"ToAnthropic/1 million parts, refused", ToAnthropic, string(manyParts(1_000_000)), false},
		{"ToAnthropic/invalid UTF-8 arguments, refused", ToAnthropic,
			openAIHead + `{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{` + invalid + `}"}}]}]}`, false},
		{"ToAnthropic/invalid UTF-8 role, refused", ToAnthropic,
			openAIHead + `{"role":"` + invalid + `","content":""}]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			var (
				out []byte
				err error
			)
			n := allocated(func() { out, err = c.tr(body) })
			if (err == nil) != c.ok {
				t.Fatalf("err = %.200v", err)
			}
			if err != nil && len(err.Error()) > 4*maxEcho+200 {
				t.Errorf("error of %d bytes: %.300s", len(err.Error()), err)
			}
			if err == nil && !json.Valid(out) {
				t.Fatalf("invalid JSON out: %.300s", out)
			}
			t.Logf("body %d bytes, output %d, allocated %d bytes (%.2fx)", len(body), len(out), n, float64(n)/float64(len(body)))
			if n > 4*uint64(len(body)) {
				t.Errorf("allocated %d bytes for a %d-byte body: more than 4x", n, len(body))
			}
			// Refused: nothing for an output, at most the offsets of
			// unknown keys (see otherKey).
			if !c.ok && n > uint64(len(body))/2 {
				t.Errorf("allocated %d bytes to refuse a %d-byte body", n, len(body))
			}
		})
	}
}
