package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/sse"
)

func init() {
	now = func() time.Time { return time.Unix(1700000000, 0) }
	n := 0
	newID = func(prefix string) string {
		n++
		return prefix + "gen" + string(rune('0'+n%10))
	}
}

// golden is one translation case. Every part is optional, so that a case may
// cover a request, a response, a stream, or all of them.
type golden struct {
	Model            string          `json:"model"`
	Request          json.RawMessage `json:"request"`
	UpstreamRequest  json.RawMessage `json:"upstream_request"`
	UpstreamResponse json.RawMessage `json:"upstream_response"`
	Response         json.RawMessage `json:"response"`
	// Streams are lists of {"event": name, "data": JSON or "[DONE]"};
	// UpstreamStreamRaw, when set, is sent as is after UpstreamStream.
	UpstreamStream    []streamEvent `json:"upstream_stream"`
	UpstreamStreamRaw string        `json:"upstream_stream_raw"`
	Stream            []streamEvent `json:"stream"`
	StreamError       bool          `json:"stream_error"`
	IncludeUsage      bool          `json:"include_usage"`
	Usage             *Usage        `json:"usage"`
}

type streamEvent struct {
	Event string          `json:"event,omitempty"`
	Data  json.RawMessage `json:"data"`
}

func encodeStream(evs []streamEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Event != "" {
			b.WriteString("event: " + e.Event + "\n")
		}
		data := e.Data
		if string(data) == `"[DONE]"` {
			data = []byte("[DONE]")
		} else {
			var c bytes.Buffer
			if err := json.Compact(&c, data); err == nil {
				data = c.Bytes()
			}
		}
		b.WriteString("data: " + string(data) + "\n\n")
	}
	return b.String()
}

// decodeStream parses a translated stream back into events, checking that
// every data payload is valid JSON or [DONE].
func decodeStream(t *testing.T, s []byte) []streamEvent {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(s), 0)
	var out []streamEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("translated stream is not valid SSE: %v\n%s", err, s)
		}
		if ev.Data == nil {
			continue
		}
		data := json.RawMessage(append([]byte(nil), ev.Data...))
		if ev.IsDone() {
			data = json.RawMessage(`"[DONE]"`)
		} else if !json.Valid(data) {
			t.Fatalf("event data is not JSON: %s", data)
		}
		out = append(out, streamEvent{Event: string(ev.Name), Data: data})
	}
}

func normalize(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", raw, err)
	}
	return v
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func assertJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	g, w := normalize(t, got), normalize(t, want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s mismatch\n got: %s\nwant: %s", what, pretty(g), pretty(w))
	}
}

func assertStream(t *testing.T, got []byte, want []streamEvent) {
	t.Helper()
	gotEvs := decodeStream(t, got)
	var g, w []any
	for _, e := range gotEvs {
		g = append(g, map[string]any{"event": e.Event, "data": normalize(t, e.Data)})
	}
	for _, e := range want {
		w = append(w, map[string]any{"event": e.Event, "data": normalize(t, e.Data)})
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("stream mismatch\n got: %s\nwant: %s", pretty(g), pretty(w))
	}
}

func runGolden(t *testing.T, dir string, fn func(t *testing.T, g *golden)) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files in %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&g); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if g.Model == "" {
				g.Model = "test-model"
			}
			fn(t, &g)
		})
	}
}

// TestGoldenAnthropicClient covers an Anthropic client in front of an
// OpenAI-compatible upstream.
func TestGoldenAnthropicClient(t *testing.T) {
	runGolden(t, "anthropic_client", func(t *testing.T, g *golden) {
		if g.Request != nil {
			got, err := ToOpenAI(g.Request)
			if err != nil {
				t.Fatalf("ToOpenAI: %v", err)
			}
			assertJSON(t, "upstream request", got, g.UpstreamRequest)
		}
		if g.UpstreamResponse != nil {
			got, err := FromOpenAIResponse(g.UpstreamResponse, g.Model)
			if err != nil {
				t.Fatalf("FromOpenAIResponse: %v", err)
			}
			assertJSON(t, "response", got, g.Response)
		}
		if g.UpstreamStream != nil || g.UpstreamStreamRaw != "" {
			in := encodeStream(g.UpstreamStream) + g.UpstreamStreamRaw
			var out bytes.Buffer
			flushes := 0
			u, err := StreamToAnthropic(&out, func() { flushes++ }, strings.NewReader(in), g.Model)
			if (err != nil) != g.StreamError {
				t.Fatalf("StreamToAnthropic error = %v, want error: %v", err, g.StreamError)
			}
			assertStream(t, out.Bytes(), g.Stream)
			if flushes != len(g.Stream) {
				t.Errorf("flushed %d times for %d events", flushes, len(g.Stream))
			}
			if g.Usage != nil && u != *g.Usage {
				t.Errorf("usage = %+v, want %+v", u, *g.Usage)
			}
		}
	})
}

// TestGoldenOpenAIClient covers an OpenAI client in front of an Anthropic
// upstream.
func TestGoldenOpenAIClient(t *testing.T) {
	runGolden(t, "openai_client", func(t *testing.T, g *golden) {
		if g.Request != nil {
			got, err := ToAnthropic(g.Request)
			if err != nil {
				t.Fatalf("ToAnthropic: %v", err)
			}
			assertJSON(t, "upstream request", got, g.UpstreamRequest)
		}
		if g.UpstreamResponse != nil {
			got, err := FromAnthropicResponse(g.UpstreamResponse, g.Model)
			if err != nil {
				t.Fatalf("FromAnthropicResponse: %v", err)
			}
			assertJSON(t, "response", got, g.Response)
		}
		if g.UpstreamStream != nil || g.UpstreamStreamRaw != "" {
			in := encodeStream(g.UpstreamStream) + g.UpstreamStreamRaw
			var out bytes.Buffer
			flushes := 0
			u, err := StreamToOpenAI(&out, func() { flushes++ }, strings.NewReader(in), g.Model, g.IncludeUsage)
			if (err != nil) != g.StreamError {
				t.Fatalf("StreamToOpenAI error = %v, want error: %v", err, g.StreamError)
			}
			assertStream(t, out.Bytes(), g.Stream)
			if flushes != len(g.Stream) {
				t.Errorf("flushed %d times for %d events", flushes, len(g.Stream))
			}
			if g.Usage != nil && u != *g.Usage {
				t.Errorf("usage = %+v, want %+v", u, *g.Usage)
			}
		}
	})
}
