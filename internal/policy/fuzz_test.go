package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/store"
)

var endpoints = []string{"/chat/completions", "/completions", "/responses", "/embeddings", "/messages", "/other"}

var fuzzSeeds = []string{
	`{}`,
	`{"model":"m","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello, world!"}],"max_tokens":100}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"max_completion_tokens":0,"max_tokens":null}`,
	`{"messages":[{"role":"assistant","content":"<think>a b</think> c d","tool_calls":null},{"role":"user","content":"x\u0020y\ud83d\ude00 z"}],"n_predict":-1}`,
	`{"messages":[{"role":"assistant","content":[{"type":"text","text":"a </thi"},{"text":"nk> b c","type":"text"}]}],"tools":[]}`,
	`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi there"}]},{"type":"function_call","arguments":"{}"}],"instructions":"be brief","max_output_tokens":1e3}`,
	`{"prompt":["a b c",[1,2,3],"d"],"max_tokens":0}`,
	`{"prompt":[1,2,3,4],"max_tokens":12.0,"truncate_prompt_tokens":2}`,
	`{"max_tokens":1024,"system":[{"type":"text","text":"s t"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"image"}]}]}]}`,
	` { "max_tokens" : 99999 , "max_tokens" : 5 } `,
	`{"messages":[{"role":"user","content":"a","content":"b c"}],"chat_template":null}`,
}

func FuzzAdmit(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(100), uint16(0))
		f.Add([]byte(s), uint16(0), uint16(50))
	}
	f.Fuzz(func(t *testing.T, body []byte, ceiling, context uint16) {
		valid := json.Valid(body)
		var doc map[string]any
		isObject := valid && json.Unmarshal(body, &doc) == nil && doc != nil
		for _, ep := range endpoints {
			req, err := Inspect(body, ep)
			if err != nil {
				var r *Refusal
				if !errors.As(err, &r) || r.Status != 400 {
					t.Fatalf("%s: error %v is not a 400 Refusal", ep, err)
				}
				if isObject && r.Code != "invalid_value" {
					t.Fatalf("%s: valid object refused: %v", ep, err)
				}
			}
			if req.PromptLowerBound < 0 || req.PromptLowerBound > len(body) {
				t.Fatalf("%s: bound %d for %d bytes", ep, req.PromptLowerBound, len(body))
			}
			if err == nil && isObject && ep == "/chat/completions" {
				if want := refChatBound(doc); req.PromptLowerBound != want {
					t.Fatalf("chat bound %d, reference %d", req.PromptLowerBound, want)
				}
			}
			p := store.Policy{MaxOutputTokens: int(ceiling), Tools: "deny", Media: "allow"}
			orig := bytes.Clone(body)
			out, r := Admit(body, ep, req, p, int(context))
			if !bytes.Equal(body, orig) {
				t.Fatalf("%s: Admit modified its input", ep)
			}
			if r != nil {
				if r.Status != 400 || r.Code == "" || r.Message == "" {
					t.Fatalf("%s: bad refusal %+v", ep, r)
				}
				if isObject && r.Code == "invalid_json" {
					t.Fatalf("%s: valid object refused as invalid: %v", ep, r)
				}
				continue
			}
			if !isObject {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s: output is not valid JSON:\n%s", ep, out)
			}
			checkRewrite(t, ep, doc, out, int(ceiling))
		}
	})
}

// checkRewrite: every member other than the output limits is unchanged, and
// the limits are at most the ceiling.
func checkRewrite(t *testing.T, ep string, in map[string]any, out []byte, ceiling int) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", ep, err)
	}
	keys, _ := outputKeys(kindOf(ep))
	limits := map[string]bool{nPredict: keys != nil}
	for _, k := range keys {
		limits[k] = true
	}
	for k, v := range in {
		if !limits[k] && !reflect.DeepEqual(v, got[k]) {
			t.Fatalf("%s: member %q changed from %v to %v", ep, k, v, got[k])
		}
	}
	for k, v := range got {
		if _, ok := in[k]; !ok && !limits[k] {
			t.Fatalf("%s: member %q added", ep, k)
		}
		if limits[k] && ceiling > 0 {
			if n, ok := v.(float64); ok && n > float64(ceiling) {
				t.Fatalf("%s: %s = %v over the ceiling %d", ep, k, v, ceiling)
			}
		}
	}
}

// refChatBound is the chat bound computed independently, from a decoded
// document.
func refChatBound(doc map[string]any) int {
	if ct, ok := doc["chat_template"]; ok && ct != nil {
		return 0
	}
	type acc struct {
		gaps int
		any  bool
	}
	add := func(a *acc, b acc) { a.gaps += b.gaps; a.any = a.any || b.any }
	var user, sys acc
	hasSys, last := false, ""
	msgs, _ := doc["messages"].([]any)
	for idx, e := range msgs {
		m, ok := e.(map[string]any)
		if !ok {
			last = ""
			continue
		}
		var texts []string
		switch c := m["content"].(type) {
		case string:
			texts = []string{c}
		case []any:
			for _, p := range c {
				pm, ok := p.(map[string]any)
				if !ok {
					continue
				}
				typ, _ := pm["type"].(string)
				txt, ok := pm["text"].(string)
				if ok && (typ == "text" || typ == "input_text" || typ == "output_text") {
					texts = append(texts, txt)
				}
			}
		}
		// Drop everything up to the last "</think>" of the concatenation.
		if cut := strings.LastIndex(strings.Join(texts, ""), thinkEnd); cut >= 0 {
			cut += len(thinkEnd)
			var kept []string
			for _, s := range texts {
				if cut >= len(s) {
					cut -= len(s)
					continue
				}
				kept = append(kept, s[cut:])
				cut = 0
			}
			texts = kept
		}
		var msg acc
		for _, s := range texts {
			n := 0
			for _, field := range strings.Split(s, " ") {
				for _, r := range field {
					if r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsPunct(r) || unicode.IsSymbol(r)) {
						n++
						break
					}
				}
			}
			if n > 0 {
				add(&msg, acc{n - 1, true})
			}
		}
		role, _ := m["role"].(string)
		last = role
		switch role {
		case "user":
			add(&user, msg)
		case "assistant":
			if m["tool_calls"] == nil && m["function_call"] == nil {
				add(&user, msg)
			}
		case "system":
			if idx == 0 {
				sys, hasSys = msg, true
			}
		}
	}
	if hasSys && last == "user" {
		add(&user, sys)
	}
	b := 0
	if user.any {
		b = user.gaps + 1
	}
	if t, ok := doc["truncate_prompt_tokens"]; ok && t != nil {
		if k, ok := t.(float64); ok && k >= 1 && k == float64(int(k)) {
			b = min(b, int(k))
		} else {
			b = 0
		}
	}
	return b
}

// TestFuzzSeeds runs the fuzz properties over the seeds in every test run.
func TestFuzzSeeds(t *testing.T) {
	for _, s := range fuzzSeeds {
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatalf("seed %s: %v", s, err)
		}
		r, err := Inspect([]byte(s), "/chat/completions")
		if err == nil && r.PromptLowerBound != refChatBound(doc) {
			t.Errorf("seed %s: bound %d, reference %d", s, r.PromptLowerBound, refChatBound(doc))
		}
	}
}
