package admin_test

import (
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

func TestDeriveSlug(t *testing.T) {
	for in, want := range map[string]string{
		"vLLM Moscow":             "vllm-moscow",
		"  --OpenAI (prod)-- ":    "openai-prod",
		"a__b..c":                 "a-b-c",
		"Москва":                  "",
		"Qwen3 на сервере 2":      "qwen3-2",
		strings.Repeat("ab-", 40): strings.TrimRight(strings.Repeat("ab-", 21), "-"),
	} {
		if got := admin.DeriveSlug(in); got != want {
			t.Errorf("DeriveSlug(%q) = %q, want %q", in, got, want)
		}
	}
}
