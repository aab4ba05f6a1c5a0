package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestToOpenAIErrors(t *testing.T) {
	const base = `"model":"m","max_tokens":10`
	cases := []struct{ body, field string }{
		{`[]`, "body"},
		{`{"max_tokens":10,"messages":[]}`, "model"},
		{`{"model":"m","messages":[]}`, "max_tokens"},
		{`{` + base + `}`, "messages"},
		{`{` + base + `,"messages":[],"thinking":{"type":"enabled","budget_tokens":1000}}`, "thinking"},
		{`{` + base + `,"messages":[{"role":"system","content":"x"}]}`, "messages[0].role"},
		{`{` + base + `,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"document","source":{}}]}]}`, "messages[1].content[1].type"},
		{`{` + base + `,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"}]}]}`, "messages[0].content[0].type"},
		{`{` + base + `,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type"},
		{`{` + base + `,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}]}`, "messages[0].content[0].content[0].type"},
		{`{` + base + `,"messages":[{"role":"user","content":[{"type":"text","text":"x","citations":[{"type":"char_location"}]}]}]}`, "messages[0].content[0].citations"},
		{`{` + base + `,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text"},
		{`{` + base + `,"messages":[{"role":"user","content":42}]}`, "messages[0].content"},
		{`{` + base + `,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type"},
		{`{` + base + `,"messages":[],"tools":[{"name":"t"}]}`, "tools[0].input_schema"},
		{`{` + base + `,"messages":[],"tool_choice":{"type":"sometimes"}}`, "tool_choice.type"},
		{`{` + base + `,"messages":[],"tool_choice":{"type":"tool"}}`, "tool_choice.name"},
		{`{` + base + `,"messages":[],"metadata":{"user_id":"u","session":"s"}}`, "metadata.session"},
		{`{` + base + `,"messages":[],"stop_sequences":["a",1]}`, "stop_sequences[1]"},
		{`{` + base + `,"messages":[],"temperature":"hot"}`, "temperature"},
		{`{` + base + `,"messages":[],"top_k":1.5}`, "top_k"},
		{`{` + base + `,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":[1]}]}]}`, "messages[0].content[0].input"},
	}
	for _, c := range cases {
		_, err := ToOpenAI([]byte(c.body))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v, want *Error", c.body, err)
			continue
		}
		if e.Field != c.field {
			t.Errorf("%s: field = %q (%v), want %q", c.body, e.Field, e, c.field)
		}
	}
}

func TestToAnthropicErrors(t *testing.T) {
	const base = `"model":"m","messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ body, field string }{
		{`"x"`, "body"},
		{`{` + base + `,"n":2}`, "n"},
		{`{` + base + `,"logprobs":true}`, "logprobs"},
		{`{` + base + `,"top_logprobs":3}`, "top_logprobs"},
		{`{` + base + `,"response_format":{"type":"json_object"}}`, "response_format.type"},
		{`{` + base + `,"response_format":{"type":"json_schema","json_schema":{}}}`, "response_format.type"},
		{`{` + base + `,"seed":1}`, "seed"},
		{`{` + base + `,"presence_penalty":0.5}`, "presence_penalty"},
		{`{` + base + `,"logit_bias":{"1":2}}`, "logit_bias"},
		{`{` + base + `,"modalities":["text","audio"]}`, "modalities[1]"},
		{`{` + base + `,"functions":[{"name":"f"}]}`, "functions"},
		{`{` + base + `,"max_tokens":0}`, "max_tokens"},
		{`{"model":"m","messages":[]}`, "messages"},
		{`{"model":"m","messages":[{"role":"function","content":"x","name":"f"}]}`, "messages[0].role"},
		{`{"model":"m","messages":[{"role":"user","content":"x","name":"bob"}]}`, "messages[0].name"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"x"}}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","messages":[{"role":"assistant","content":null}]}`, "messages[0].content"},
		{`{"model":"m","messages":[{"role":"assistant","audio":{"id":"a"}}]}`, "messages[0].audio"},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1,2]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{}}]}]}`, "messages[0].tool_calls[0].custom"},
		{`{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{` + base + `,"tools":[{"type":"function","function":{"name":"f","strict":true}}]}`, "tools[0].function.strict"},
		{`{` + base + `,"tools":[{"type":"custom","custom":{"name":"f"}}]}`, "tools[0].custom"},
		{`{` + base + `,"tool_choice":"sometimes"}`, "tool_choice"},
		{`{` + base + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{}}}`, "tool_choice.allowed_tools"},
		{`{` + base + `,"stop":3}`, "stop"},
		{`{` + base + `,"stream_options":{"include_obfuscation":true}}`, "stream_options.include_obfuscation"},
	}
	for _, c := range cases {
		_, err := ToAnthropic([]byte(c.body))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v, want *Error", c.body, err)
			continue
		}
		if e.Field != c.field {
			t.Errorf("%s: field = %q (%v), want %q", c.body, e.Field, e, c.field)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Field: "n", Message: "only n=1"}
	if e.Error() != "n: only n=1" {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestStopReasons(t *testing.T) {
	toA := []struct {
		finish, vllm, stop string
		seq                *string
	}{
		{"stop", ``, "end_turn", nil},
		{"stop", `null`, "end_turn", nil},
		{"stop", `128001`, "end_turn", nil},
		{"stop", `"\n\nUser:"`, "stop_sequence", ptr("\n\nUser:")},
		{"length", `"x"`, "max_tokens", nil},
		{"tool_calls", ``, "tool_use", nil},
		{"function_call", ``, "tool_use", nil},
		{"content_filter", ``, "refusal", nil},
		{"", ``, "end_turn", nil},
	}
	for _, c := range toA {
		stop, seq := stopReasonFromOpenAI(c.finish, json.RawMessage(c.vllm))
		if stop != c.stop || (seq == nil) != (c.seq == nil) || (seq != nil && *seq != *c.seq) {
			t.Errorf("%q/%s -> %q %v, want %q %v", c.finish, c.vllm, stop, seq, c.stop, c.seq)
		}
	}
	toO := map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "stop", "model_context_window_exceeded": "length", "": "stop",
	}
	for in, want := range toO {
		if got := stopToOpenAI(in); got != want {
			t.Errorf("stopToOpenAI(%q) = %q, want %q", in, got, want)
		}
	}
}

func ptr(s string) *string { return &s }

// TestStreamToAnthropicInterleavedArgs: arguments for a tool call whose block
// a later tool call closed cannot be placed; the stream fails loudly.
func TestStreamToAnthropicInterleavedArgs(t *testing.T) {
	in := `data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"a","arguments":"{"}},{"index":1,"id":"b","function":{"name":"b","arguments":"{"}}]}}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}

data: [DONE]

`
	var out bytes.Buffer
	_, err := StreamToAnthropic(&out, func() {}, strings.NewReader(in), "m")
	if err == nil || !strings.Contains(err.Error(), "tool call 0") {
		t.Fatalf("err = %v", err)
	}
	// The stream stops without its terminator; the caller (the gateway's
	// endStream) writes the error event, the same for every pairing.
	evs := decodeStream(t, out.Bytes())
	if last := evs[len(evs)-1]; last.Event == "message_stop" || last.Event == "error" {
		t.Errorf("last event = %s, want the stream cut before its end", last.Event)
	}
}

// TestStreamEmpty: a stream with only [DONE] still forms a valid message.
func TestStreamEmpty(t *testing.T) {
	var out bytes.Buffer
	if _, err := StreamToAnthropic(&out, nil, strings.NewReader("data: [DONE]\n\n"), "m"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range decodeStream(t, out.Bytes()) {
		names = append(names, e.Event)
	}
	if got := strings.Join(names, ","); got != "message_start,message_delta,message_stop" {
		t.Errorf("events = %s", got)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, io.ErrClosedPipe
	}
	w.n--
	return len(p), nil
}

// TestStreamWriteError: once the client is gone, nothing more is written and
// the write error is returned.
func TestStreamWriteError(t *testing.T) {
	oa := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"
	if _, err := StreamToAnthropic(&failWriter{n: 1}, nil, strings.NewReader(oa), "m"); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("StreamToAnthropic err = %v", err)
	}
	an := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if _, err := StreamToOpenAI(&failWriter{n: 1}, nil, strings.NewReader(an), "m", true); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("StreamToOpenAI err = %v", err)
	}
}

// TestStreamToOpenAIUnknownBlock: a block type OpenAI cannot carry fails the
// stream rather than vanishing.
func TestStreamToOpenAIUnknownBlock(t *testing.T) {
	an := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\"}}\n\n"
	var out bytes.Buffer
	_, err := StreamToOpenAI(&out, nil, strings.NewReader(an), "m", false)
	if err == nil || !strings.Contains(err.Error(), "server_tool_use") {
		t.Fatalf("err = %v", err)
	}
	if bytes.Contains(out.Bytes(), []byte("[DONE]")) {
		t.Error("a failed stream must not end with [DONE]")
	}
}

func TestFromResponsesUpstreamFaults(t *testing.T) {
	for _, b := range []string{`[]`, `{"choices":[]}`, `{"error":{"message":"boom"}}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"not json"}}]}}]}`} {
		if _, err := FromOpenAIResponse([]byte(b), "m"); err == nil {
			t.Errorf("FromOpenAIResponse(%s) succeeded", b)
		} else if errors.As(err, new(*Error)) {
			t.Errorf("FromOpenAIResponse(%s) = *Error, want an upstream fault", b)
		}
	}
	for _, b := range []string{`1`, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
		`{"type":"message","content":[{"type":"server_tool_use"}]}`, `{"type":"other"}`} {
		if _, err := FromAnthropicResponse([]byte(b), "m"); err == nil {
			t.Errorf("FromAnthropicResponse(%s) succeeded", b)
		}
	}
}

// TestStreamToAnthropicEarlyUsage: with vLLM's continuous usage stats the
// first chunk already reports the prompt tokens, which message_start carries.
func TestStreamToAnthropicEarlyUsage(t *testing.T) {
	in := `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":7,"completion_tokens":0}}

data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":1}}

data: [DONE]

`
	var out bytes.Buffer
	u, err := StreamToAnthropic(&out, nil, strings.NewReader(in), "m")
	if err != nil || u != (Usage{7, 1}) {
		t.Fatalf("usage %+v, err %v", u, err)
	}
	evs := decodeStream(t, out.Bytes())
	var start struct {
		Message struct {
			Usage struct {
				InputTokens int `json:"input_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	if err := json.Unmarshal(evs[0].Data, &start); err != nil || start.Message.Usage.InputTokens != 7 {
		t.Errorf("message_start = %s", evs[0].Data)
	}
}
