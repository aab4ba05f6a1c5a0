package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/sse"
)

// seeds adds the golden requests (or streams) of dir to f.
func seeds(f *testing.F, dir string, pick func(g *golden) []byte) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(b, &g); err != nil {
			f.Fatal(err)
		}
		if s := pick(&g); s != nil {
			f.Add(s)
		}
	}
}

func checkRequest(t *testing.T, out []byte, err error) {
	if err != nil {
		if !errors.As(err, new(*Error)) {
			t.Fatalf("error is not an *Error: %v", err)
		}
		return
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON out: %s", out)
	}
}

func FuzzToOpenAI(f *testing.F) {
	seeds(f, "anthropic_client", func(g *golden) []byte { return g.Request })
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","is_error":true}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ToOpenAI(body)
		checkRequest(t, out, err)
	})
}

func FuzzToAnthropic(f *testing.F) {
	seeds(f, "openai_client", func(g *golden) []byte { return g.Request })
	f.Add([]byte(`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":[]},{"role":"user","content":[]}],"parallel_tool_calls":false,"tool_choice":"none"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ToAnthropic(body)
		checkRequest(t, out, err)
	})
}

func FuzzFromResponses(f *testing.F) {
	seeds(f, "anthropic_client", func(g *golden) []byte { return g.UpstreamResponse })
	seeds(f, "openai_client", func(g *golden) []byte { return g.UpstreamResponse })
	f.Fuzz(func(t *testing.T, body []byte) {
		if out, err := FromOpenAIResponse(body, "m"); err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON out: %s", out)
		}
		if out, err := FromAnthropicResponse(body, "m"); err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON out: %s", out)
		}
	})
}

// checkStream asserts that out is well-formed SSE whose data is JSON or
// [DONE], and that a stream ends with its terminator exactly when the
// translation succeeded.
func checkStream(t *testing.T, out []byte, err error, terminal string) {
	rd := sse.NewReader(bytes.NewReader(out), 0)
	last := ""
	for {
		ev, rerr := rd.Next()
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			t.Fatalf("output is not valid SSE: %v\n%s", rerr, out)
		}
		if ev.Data == nil {
			continue
		}
		if !ev.IsDone() && !json.Valid(ev.Data) {
			t.Fatalf("event data is not JSON: %s", ev.Data)
		}
		last = string(ev.Name)
		if ev.IsDone() {
			last = "[DONE]"
		}
	}
	if (err == nil) != (last == terminal) {
		t.Fatalf("err = %v but last event = %q\n%s", err, last, out)
	}
}

func streamSeed(g *golden) []byte {
	if g.UpstreamStream == nil {
		return nil
	}
	return []byte(encodeStream(g.UpstreamStream) + g.UpstreamStreamRaw)
}

func FuzzStreamToAnthropic(f *testing.F) {
	seeds(f, "anthropic_client", streamSeed)
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		_, err := StreamToAnthropic(&out, nil, bytes.NewReader(in), "m")
		checkStream(t, out.Bytes(), err, "message_stop")
	})
}

func FuzzStreamToOpenAI(f *testing.F) {
	seeds(f, "openai_client", streamSeed)
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		_, err := StreamToOpenAI(&out, nil, strings.NewReader(string(in)), "m", len(in)%2 == 0)
		checkStream(t, out.Bytes(), err, "[DONE]")
	})
}
