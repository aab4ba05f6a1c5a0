package readiness

import (
	"path"
	"regexp"
	"strings"
)

// Quantization is descriptive (design 003: "llama.cpp may additionally
// supply … quantization … through a bounded /props read"): it never decides
// routing, so a value rolter cannot read is dropped, not a reason to mark
// the provider not ready.
//
// llama.cpp reports it in two ways, read in this order:
//
//  1. The model's file type by name: /props model_ftype and, on the
//     /v1/models card, meta.ftype (recent versions; both are
//     llama_model_ftype_name, e.g. "Q4_K - Medium", "IQ2_XXS - 2.0625 bpw",
//     "Q8_0", "BF16", "all F32", with " (guessed)" appended when the GGUF
//     has no general.file_type).
//  2. Older versions report neither; their /props model_path names the GGUF
//     file, and GGUF files carry their file type in the name by convention
//     ("llama-2-7b.Q4_0.gguf", "Qwen3-8B-Q4_K_M.gguf",
//     "…-IQ2_XXS-00001-of-00003.gguf").
//
// Both are shown in rolter's short form, the one file names use: "Q4_K_M",
// "IQ2_XXS", "Q8_0", "F32".

// maxQuantization bounds the reported name; llama.cpp's longest is ~40.
const maxQuantization = 48

// ftypeSizes maps the size word of a k-quant name to its file-name suffix.
var ftypeSizes = map[string]string{"small": "_S", "medium": "_M", "large": "_L"}

// quantName is a file-type token: Q4_K_M, IQ2_XXS, Q8_0, TQ1_0, F16,
// BF16, MXFP4_MOE.
var quantName = regexp.MustCompile(`^(?:I?Q[1-8](?:_[0-9A-Z]{1,3}){0,2}|TQ[12]_0|BF16|F16|F32|MXFP4(?:_MOE)?)$`)

// ftypeShort turns llama_model_ftype_name's text into the short form; ""
// when it is not a file type rolter recognises.
func ftypeShort(name string) string {
	name = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(name), "(guessed)"))
	if len(name) == 0 || len(name) > maxQuantization {
		return ""
	}
	name = strings.TrimPrefix(name, "all ") // "all F32"
	base, detail, _ := strings.Cut(name, " - ")
	base = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(base), " ", "_")) // "MXFP4 MoE"
	if sfx, ok := ftypeSizes[strings.ToLower(strings.TrimSpace(detail))]; ok {
		base += sfx
	}
	if !quantName.MatchString(base) {
		return ""
	}
	return base
}

// quantFromPath reads the file-type token from a GGUF file name: the last
// dot- or dash-separated part of the name (shard suffix removed) that is a
// file-type name; "" if none is.
func quantFromPath(p string) string {
	name := path.Base(strings.ReplaceAll(p, `\`, "/"))
	lower := strings.ToLower(name)
	if !strings.HasSuffix(lower, ".gguf") {
		return ""
	}
	name = shardSuffix.ReplaceAllString(name[:len(name)-len(".gguf")], "")
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '-' })
	for i := len(parts) - 1; i >= 0; i-- {
		// "UD-Q4_K_XL" (Unsloth dynamic) is one token to a reader but
		// two parts here; the last part is the type either way.
		if tok := strings.ToUpper(parts[i]); quantName.MatchString(tok) {
			return tok
		}
	}
	return ""
}

// shardSuffix is a split GGUF's "-00001-of-00003".
var shardSuffix = regexp.MustCompile(`-\d{5}-of-\d{5}$`)

// quantization picks the first file type llama.cpp reported: /props
// model_ftype, the card's meta.ftype, then the /props model_path file name.
func quantization(propsFtype, cardFtype, modelPath string) string {
	for _, n := range []string{propsFtype, cardFtype} {
		if q := ftypeShort(n); q != "" {
			return q
		}
	}
	return quantFromPath(modelPath)
}
