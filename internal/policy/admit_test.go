package policy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

func TestAdmitToolsAndMedia(t *testing.T) {
	body := []byte(`{"model":"m","messages":[]}`)
	tests := []struct {
		name string
		req  Request
		p    store.Policy
		code string
	}{
		{"tools denied", Request{HasTools: true}, store.Policy{Tools: "deny"}, CodeToolsDenied},
		{"tools allowed", Request{HasTools: true}, store.Policy{Tools: "allow"}, ""},
		{"tools default", Request{HasTools: true}, store.Policy{}, ""},
		{"deny without tools", Request{}, store.Policy{Tools: "deny"}, ""},
		{"media denied", Request{HasMedia: true}, store.Policy{Media: "deny"}, CodeMediaDenied},
		{"media allowed", Request{HasMedia: true}, store.Policy{Media: "allow"}, ""},
		{"deny without media", Request{HasTools: true}, store.Policy{Media: "deny"}, ""},
		{"tools checked first", Request{HasTools: true, HasMedia: true}, store.Policy{Tools: "deny", Media: "deny"}, CodeToolsDenied},
	}
	for _, tc := range tests {
		out, r := Admit(body, "/chat/completions", tc.req, tc.p, 0)
		switch {
		case tc.code == "" && r != nil:
			t.Errorf("%s: refused: %v", tc.name, r)
		case tc.code == "" && !bytes.Equal(out, body):
			t.Errorf("%s: body changed: %s", tc.name, out)
		case tc.code != "" && (r == nil || r.Code != tc.code || r.Status != 400 || out != nil):
			t.Errorf("%s: got %v, %s; want a 400 %s", tc.name, r, out, tc.code)
		}
	}
}

func TestAdmitCeiling(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		ceiling  int
		in, want string
		output   int // the limit Admit admits against
	}{
		{"clamp max_tokens", "/chat/completions", 1000,
			`{"model":"m",  "max_tokens" :  5000 , "messages":[{"role":"user","content":"max_tokens: 5000"}]}`,
			`{"model":"m",  "max_tokens" :  1000 , "messages":[{"role":"user","content":"max_tokens: 5000"}]}`, 1000},
		{"clamp both keys", "/chat/completions", 100,
			"{\n  \"max_completion_tokens\": 4096,\n  \"max_tokens\": 2e3\n}\n",
			"{\n  \"max_completion_tokens\": 100,\n  \"max_tokens\": 100\n}\n", 100},
		{"clamp only the key over", "/chat/completions", 100,
			`{"max_completion_tokens":50,"max_tokens":99999}`,
			`{"max_completion_tokens":50,"max_tokens":100}`, 50},
		{"under the ceiling unchanged", "/chat/completions", 100,
			`{"max_tokens":100.0}`, `{"max_tokens":100.0}`, 100},
		{"insert when absent", "/chat/completions", 1000,
			`{"model":"m","messages":[]}`, `{"max_tokens":1000,"model":"m","messages":[]}`, 1000},
		{"insert into empty object", "/chat/completions", 7,
			" { } ", ` {"max_tokens":7 } `, 7},
		{"insert on responses", "/v1/responses", 300,
			`{"input":"hi"}`, `{"max_output_tokens":300,"input":"hi"}`, 300},
		{"clamp responses", "/responses", 300,
			`{"input":"hi","max_output_tokens":301}`, `{"input":"hi","max_output_tokens":300}`, 300},
		{"responses ignores max_tokens", "/responses", 300,
			`{"max_tokens":9999}`, `{"max_output_tokens":300,"max_tokens":9999}`, 300},
		{"insert on completions", "/completions", 64,
			`{"prompt":"x"}`, `{"max_tokens":64,"prompt":"x"}`, 64},
		{"null is replaced", "/chat/completions", 64,
			`{"max_tokens":null}`, `{"max_tokens":64}`, 64},
		{"null beside a limit stays", "/chat/completions", 64,
			`{"max_completion_tokens":null,"max_tokens":10}`, `{"max_completion_tokens":null,"max_tokens":10}`, 10},
		{"chat zero is no limit", "/chat/completions", 64,
			`{"max_completion_tokens":0}`, `{"max_completion_tokens":64}`, 64},
		{"chat zero beside a limit stays", "/chat/completions", 64,
			`{"max_completion_tokens":0,"max_tokens":5}`, `{"max_completion_tokens":0,"max_tokens":5}`, 5},
		{"completions zero stays", "/completions", 64,
			`{"prompt":"x","max_tokens":0,"echo":true}`, `{"prompt":"x","max_tokens":0,"echo":true}`, 0},
		{"n_predict unlimited is clamped", "/chat/completions", 64,
			`{"n_predict":-1,"max_tokens":10}`, `{"n_predict":64,"max_tokens":10}`, 10},
		{"n_predict alone: insert and clamp", "/chat/completions", 64,
			`{"n_predict":100000}`, `{"max_tokens":64,"n_predict":64}`, 64},
		{"repeated keys all clamped", "/chat/completions", 10,
			`{"max_tokens":99,"max_tokens":5}`, `{"max_tokens":10,"max_tokens":5}`, 5},
		{"bad value replaced", "/chat/completions", 10,
			`{"max_tokens":"lots"}`, `{"max_tokens":10}`, 10},
		{"no ceiling on embeddings", "/embeddings", 10,
			`{"input":"x"}`, `{"input":"x"}`, 0},
		{"unknown endpoint untouched", "/audio/speech", 10,
			`{"max_tokens":99}`, `{"max_tokens":99}`, 0},
		{"escaped key found", "/chat/completions", 10,
			`{"max\u005ftokens":99}`, `{"max\u005ftokens":10}`, 10},
		{"nested max_tokens untouched", "/chat/completions", 10,
			`{"metadata":{"max_tokens":99},"max_tokens":8}`, `{"metadata":{"max_tokens":99},"max_tokens":8}`, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			orig := bytes.Clone(in)
			p := store.Policy{MaxOutputTokens: tc.ceiling}
			out, r := Admit(in, tc.endpoint, Request{}, p, 0)
			if r != nil {
				t.Fatalf("refused: %v", r)
			}
			if string(out) != tc.want {
				t.Fatalf("Admit(%s)\n got %s\nwant %s", tc.in, out, tc.want)
			}
			if !bytes.Equal(in, orig) {
				t.Fatalf("input body modified: %s", in)
			}
			if tc.in == tc.want && &out[0] != &in[0] {
				t.Errorf("unchanged body was copied")
			}
			// The limit Admit used: one token of room short of it is refused.
			ctx := tc.output + 3
			if _, r := Admit(in, tc.endpoint, Request{PromptLowerBound: 3}, p, ctx); r != nil && tc.endpoint != "/audio/speech" {
				t.Errorf("refused at exactly the context: %v", r)
			}
			if _, r := Admit(in, tc.endpoint, Request{PromptLowerBound: 4}, p, ctx); r == nil && tc.endpoint != "/audio/speech" {
				t.Errorf("admitted one token over the context (output %d)", tc.output)
			}
		})
	}
}

func TestAdmitContext(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name    string
		req     Request
		ceiling int
		context int
		msg     string // "" admits
	}{
		{"unknown context", Request{MaxTokens: 1 << 30, PromptLowerBound: 1 << 30}, 0, 0, ""},
		{"exactly fits", Request{MaxTokens: 60, PromptLowerBound: 40}, 0, 100, ""},
		{"one over", Request{MaxTokens: 60, PromptLowerBound: 41}, 0, 100,
			"max output 60 + at least 41 prompt tokens exceeds the context of 100 tokens"},
		{"output alone too big", Request{MaxTokens: 101}, 0, 100,
			"max output 101 + at least 0 prompt tokens exceeds the context of 100 tokens"},
		{"no limit known: prompt alone fits", Request{PromptLowerBound: 100}, 0, 100, ""},
		{"no limit known: prompt alone too long", Request{PromptLowerBound: 101}, 0, 100,
			"at least 101 prompt tokens exceeds the context of 100 tokens"},
		{"ceiling as default fits", Request{PromptLowerBound: 40}, 60, 100, ""},
		{"ceiling as default over", Request{PromptLowerBound: 41}, 60, 100,
			"max output 60 + at least 41 prompt tokens exceeds the context of 100 tokens"},
		{"saturated output", Request{MaxTokens: maxCount, PromptLowerBound: maxCount}, 0, maxCount,
			"max output 2147483647 + at least 2147483647 prompt tokens exceeds the context of 2147483647 tokens"},
	}
	for _, tc := range tests {
		_, r := Admit(body, "/chat/completions", tc.req, store.Policy{MaxOutputTokens: tc.ceiling}, tc.context)
		switch {
		case tc.msg == "" && r != nil:
			t.Errorf("%s: refused: %v", tc.name, r)
		case tc.msg != "" && r == nil:
			t.Errorf("%s: admitted", tc.name)
		case tc.msg != "" && (r.Code != CodeContextLengthExceeded || r.Status != 400 || r.Message != tc.msg):
			t.Errorf("%s: got %d %s %q", tc.name, r.Status, r.Code, r.Message)
		}
	}
	// Clamped to the ceiling, then admitted against it.
	big := []byte(`{"max_tokens":5000,"messages":[{"role":"user","content":"a b c"}]}`)
	req, err := Inspect(big, "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	if _, r := Admit(big, "/chat/completions", req, store.Policy{MaxOutputTokens: 97}, 100); r != nil {
		t.Errorf("clamped request refused: %v", r)
	}
	if _, r := Admit(big, "/chat/completions", req, store.Policy{MaxOutputTokens: 98}, 100); r == nil {
		t.Errorf("98 + 3 admitted into 100")
	}
	if _, r := Admit(big, "/chat/completions", req, store.Policy{}, 100); r == nil || !strings.Contains(r.Message, "5000") {
		t.Errorf("unclamped 5000 admitted: %v", r)
	}
}

func TestAdmitInvalidBody(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"max_tokens":1`, `{"a":1}x`} {
		_, r := Admit([]byte(body), "/chat/completions", Request{}, store.Policy{MaxOutputTokens: 5}, 0)
		if r == nil || r.Code != "invalid_json" || r.Status != 400 {
			t.Errorf("Admit(%q) = %v, want invalid_json", body, r)
		}
	}
}

func TestRefusalError(t *testing.T) {
	r := &Refusal{Status: 400, Code: "tools_denied", Message: "no tools"}
	var err error = r
	if err.Error() != "tools_denied: no tools" {
		t.Errorf("Error() = %q", err.Error())
	}
}
