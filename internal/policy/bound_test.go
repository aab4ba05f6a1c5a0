package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

func completionBound(t *testing.T, prompt string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"prompt": prompt})
	r, err := Inspect(body, "/completions")
	if err != nil {
		t.Fatal(err)
	}
	return r.PromptLowerBound
}

// TestBoundBelowTrueCount checks the bound against token counts counted by
// hand from the tokenizers' rules (cl100k_base, which Llama 3 shares for
// these strings, and Llama 2's SentencePiece without BOS).
func TestBoundBelowTrueCount(t *testing.T) {
	tests := []struct {
		text     string
		bound    int
		tiktoken int // cl100k_base / Llama 3
		llama2   int // SentencePiece, no BOS
		pieces   string
	}{
		{"Hello, world!", 2, 4, 4, `"Hello" "," " world" "!"`},
		{"The quick brown fox jumps over the lazy dog.", 9, 10, 10,
			`"The" " quick" " brown" " fox" " jumps" " over" " the" " lazy" " dog" "."`},
		{"for i in range(10):", 4, 7, 8,
			`"for" " i" " in" " range" "(" "10" "):"; Llama 2 splits digits: "1" "0"`},
		{"a  b", 2, 3, 3, `"a" " " " b"`},
		{"x = 1\ny = 2", 5, 9, 9,
			`"x" " =" " " "1" "\n" "y" " =" " " "2" (digits never take a space); fields split at spaces only`},
		{"你好，世界", 1, 3, 5, `at least "你好" "，" "世界"; one field`},
		{"\t\n  ", 0, 1, 1, "whitespace only: no visible field"},
	}
	for _, tc := range tests {
		got := completionBound(t, tc.text)
		if got != tc.bound {
			t.Errorf("bound(%q) = %d, want %d", tc.text, got, tc.bound)
		}
		if got > tc.tiktoken || got > tc.llama2 {
			t.Errorf("bound(%q) = %d exceeds a true count (%d, %d)", tc.text, got, tc.tiktoken, tc.llama2)
		}
	}
}

// TestBoundPathological: inputs that tokenize into many tokens but have
// few fields give a small bound, never a large one.
func TestBoundPathological(t *testing.T) {
	tests := []struct {
		name string
		text string
		max  int
	}{
		{"one 100 KB word", strings.Repeat("x", 100<<10), 1},
		{"CJK without spaces", strings.Repeat("中文没有空格", 5000), 1},
		{"base64 blob", strings.Repeat("QUJD", 25000), 1},
		{"newline-separated lines", strings.Repeat("line\n", 1000), 1},
		{"control characters", strings.Repeat("\x01 ", 1000), 0},
		{"zero-width spaces", strings.Repeat("\u200b ", 1000), 0},
		{"no-break spaces", strings.Repeat("a\u00a0", 1000), 1},
	}
	for _, tc := range tests {
		if got := completionBound(t, tc.text); got > tc.max {
			t.Errorf("%s: bound %d, want at most %d", tc.name, got, tc.max)
		}
	}
	// One field per space-separated word, however long the words.
	if got := completionBound(t, strings.Repeat("word ", 1000)); got != 1000 {
		t.Errorf("1000 words: bound %d", got)
	}
}

// TestBoundChatTemplate: a Llama 3 rendering of a conversation has at
// least as many tokens as the bound (the template only adds header and
// end-of-turn tokens).
func TestBoundChatTemplate(t *testing.T) {
	body := `{"messages":[
		{"role":"system","content":"You are a helpful assistant."},
		{"role":"user","content":"What is the capital of France?"},
		{"role":"assistant","content":"Paris."},
		{"role":"user","content":"And of Italy?"}]}`
	r, err := Inspect([]byte(body), "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	// Fields: 5 + 6 + 1 + 3 = 15; glued worst case 15 - 4 + 1 = 12.
	// Llama 3 content tokens alone: 6 + 7 + 2 + 4 = 19, plus ~20 template
	// tokens.
	if r.PromptLowerBound != 12 {
		t.Errorf("bound %d, want 12", r.PromptLowerBound)
	}
}
