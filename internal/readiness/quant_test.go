package readiness

import (
	"context"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// Design 003: "llama.cpp may additionally supply n_ctx, quantization, build,
// slots, and modalities through a bounded /props read". The file type names
// below are llama_model_ftype_name's; the file names are real GGUF names.
func TestQuantizationSources(t *testing.T) {
	for _, tc := range []struct {
		propsFtype, cardFtype, path, want string
	}{
		{"Q4_K - Medium", "", "", "Q4_K_M"},
		{"Q3_K - Large", "", "", "Q3_K_L"},
		{"IQ2_XXS - 2.0625 bpw", "", "", "IQ2_XXS"},
		{"Q8_0", "", "", "Q8_0"},
		{"all F32", "", "", "F32"},
		{"BF16", "", "", "BF16"},
		{"MXFP4 MoE", "", "", "MXFP4_MOE"},
		{"Q5_K - Small (guessed)", "", "", "Q5_K_S"},
		// /props wins over the card; the card over the file name.
		{"Q6_K", "Q8_0", "/m/x-Q2_K.gguf", "Q6_K"},
		{"", "Q4_K - Small", "/m/x-Q2_K.gguf", "Q4_K_S"},
		{"unknown, may not match", "", "/m/x-Q2_K.gguf", "Q2_K"},
		// File names, old servers.
		{"", "", "/models/llama-2-7b.Q4_0.gguf", "Q4_0"},
		{"", "", "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"},
		{"", "", "/models/qwen2.5-7b-instruct-q4_k_m.gguf", "Q4_K_M"},
		{"", "", "/models/DeepSeek-V4-Flash-UD-IQ2_XXS-00001-of-00003.gguf", "IQ2_XXS"},
		{"", "", `C:\models\phi-3-mini-4k-instruct-fp16.gguf`, ""}, // "fp16" is not a file-type name
		{"", "", "/models/gemma-3-4b-it-BF16.gguf", "BF16"},
		{"", "", "/models/model.bin", ""},
		{"", "", "/models/model.gguf", ""},
		{"", "", "", ""},
		{strings.Repeat("Q", 200), "", "", ""},
	} {
		if got := quantization(tc.propsFtype, tc.cardFtype, tc.path); got != tc.want {
			t.Errorf("quantization(%q, %q, %q) = %q, want %q", tc.propsFtype, tc.cardFtype, tc.path, got, tc.want)
		}
	}
}

// Design 003: quantization is descriptive; a model_ftype rolter cannot
// read is dropped and the provider stays ready (only the facts that drive
// routing — the id and n_ctx — fail closed).
func TestQuantizationMalformedIsDropped(t *testing.T) {
	const id = "qwen2.5-7b-instruct-q4_k_m.gguf"
	eng := newEngine(t)
	eng.set("/health", 200, llamaHealthOK)
	eng.set("/v1/models", 200, strings.Replace(llamaModels(id, 8192, 32768), `"ftype":"Q4_K - Medium"`, `"ftype":7`, 1))
	props := strings.Replace(llamaPropsBody(id, 8192, 1, false, false, "b1"), `"model_ftype":"Q4_K - Medium"`, `"model_ftype":{"x":1}`, 1)
	props = strings.Replace(props, `"model_path":"/models/qwen2.5-7b-instruct-q4_k_m.gguf"`, `"model_path":42`, 1)
	eng.set("/props", 200, props)
	c, _ := newTestCache(t, Config{})
	c.Sync([]Provider{{ID: 3, Kind: store.KindLlamaCpp, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 3)
	if !st.Ready || st.Facts.Quantization != "" || st.Facts.Context != 8192 {
		t.Fatalf("got %+v, want ready, context 8192, no quantization", st)
	}

	// The next probe reads a well-formed one: a change of facts.
	eng.set("/props", 200, llamaPropsBody(id, 8192, 1, false, false, "b1"))
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 3); st.Facts.Quantization != "Q4_K_M" {
		t.Fatalf("got %+v, want quantization Q4_K_M", st.Facts)
	}
}
