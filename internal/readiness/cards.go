package readiness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The model-card keys that may carry a context length, in the order they
// are trusted. Runtime limits come before trained capacity, because the
// runtime limit is what the engine enforces:
//
//  1. max_model_len: vLLM and SGLang, the engine's effective limit
//     (--max-model-len / --context-length, else the model config's).
//  2. context_length: the generic key other OpenAI-compatible servers use.
//  3. meta.n_ctx: llama.cpp's per-slot runtime context (recent versions;
//     the same value as /props default_generation_settings.n_ctx).
//  4. meta.n_ctx_train: llama.cpp's trained context. Older llama.cpp cards
//     carry only this; it is an upper bound, used only when nothing above
//     is present. For kind llamacpp /props n_ctx overrides all four.
//
// A key present with null (vLLM's LoRA cards) counts as absent; a key
// present with anything but a positive integer makes the card malformed.
const contextKeysDoc = "max_model_len, context_length, meta.n_ctx, meta.n_ctx_train"

// maxContext bounds a believable context length.
const maxContext = math.MaxInt32

// modelCard is what rolter reads from the one card of GET /models.
type modelCard struct {
	id      string
	context int    // 0 if the card names none
	ftype   string // llama.cpp meta.ftype, e.g. "Q4_K - Medium"; "" if absent
}

// parseModels reads an OpenAI-style model list that must hold exactly one
// model. Its errors are reasons a provider is not ready.
func parseModels(body []byte) (modelCard, error) {
	var list struct {
		Data *[]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return modelCard{}, fmt.Errorf("GET /models: malformed JSON: %v", err)
	}
	if list.Data == nil {
		return modelCard{}, fmt.Errorf("GET /models: malformed: no \"data\" array")
	}
	if n := len(*list.Data); n != 1 {
		return modelCard{}, fmt.Errorf("GET /models returned %d models; an upstream-metadata provider must serve exactly one", n)
	}
	var card struct {
		ID            *string         `json:"id"`
		MaxModelLen   json.RawMessage `json:"max_model_len"`
		ContextLength json.RawMessage `json:"context_length"`
		Meta          *struct {
			NCtx      json.RawMessage `json:"n_ctx"`
			NCtxTrain json.RawMessage `json:"n_ctx_train"`
			Ftype     json.RawMessage `json:"ftype"`
		} `json:"meta"`
	}
	if err := json.Unmarshal((*list.Data)[0], &card); err != nil {
		return modelCard{}, fmt.Errorf("GET /models: malformed model card: %v", err)
	}
	if card.ID == nil || *card.ID == "" {
		return modelCard{}, fmt.Errorf("GET /models: malformed: the model has no id")
	}
	type key struct {
		name string
		raw  json.RawMessage
	}
	keys := []key{{"max_model_len", card.MaxModelLen}, {"context_length", card.ContextLength}}
	if card.Meta != nil {
		keys = append(keys, key{"meta.n_ctx", card.Meta.NCtx}, key{"meta.n_ctx_train", card.Meta.NCtxTrain})
	}
	mc := modelCard{id: *card.ID}
	if card.Meta != nil {
		mc.ftype = descriptiveString(card.Meta.Ftype)
	}
	for _, k := range keys {
		n, ok, err := positiveInt(k.raw)
		if err != nil {
			return modelCard{}, fmt.Errorf("GET /models: malformed: %s %s", k.name, err)
		}
		if ok {
			mc.context = n
			break
		}
	}
	return mc, nil
}

// llamaProps is what rolter reads from llama.cpp's GET /props.
type llamaProps struct {
	context    int    // default_generation_settings.n_ctx; 0 if absent
	alias      string // model_alias; "" if absent
	slots      int
	modalities []string
	build      string
	ftype      string // model_ftype, e.g. "Q4_K - Medium"; "" if absent
	modelPath  string // model_path, the GGUF file
}

// parseProps reads llama.cpp's /props. The fields that drive routing
// (n_ctx, model_alias) must be well-formed; the descriptive ones (slots,
// modalities, build, model_ftype, model_path) are dropped when they are not.
func parseProps(body []byte) (llamaProps, error) {
	var doc struct {
		DefaultGenerationSettings *struct {
			NCtx json.RawMessage `json:"n_ctx"`
		} `json:"default_generation_settings"`
		ModelAlias *string         `json:"model_alias"`
		TotalSlots json.RawMessage `json:"total_slots"`
		Modalities json.RawMessage `json:"modalities"`
		BuildInfo  json.RawMessage `json:"build_info"`
		ModelFtype json.RawMessage `json:"model_ftype"`
		ModelPath  json.RawMessage `json:"model_path"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return llamaProps{}, fmt.Errorf("GET /props: malformed JSON: %v", err)
	}
	var pr llamaProps
	if d := doc.DefaultGenerationSettings; d != nil {
		n, _, err := positiveInt(d.NCtx)
		if err != nil {
			return llamaProps{}, fmt.Errorf("GET /props: malformed: default_generation_settings.n_ctx %s", err)
		}
		pr.context = n
	}
	if doc.ModelAlias != nil {
		pr.alias = *doc.ModelAlias
	}
	if n, _, err := positiveInt(doc.TotalSlots); err == nil {
		pr.slots = n
	}
	var build string
	if json.Unmarshal(doc.BuildInfo, &build) == nil {
		pr.build = build
	}
	pr.ftype, pr.modelPath = descriptiveString(doc.ModelFtype), descriptiveString(doc.ModelPath)
	var mods map[string]bool
	if len(doc.Modalities) > 0 && json.Unmarshal(doc.Modalities, &mods) == nil && mods != nil {
		pr.modalities = modalityNames(mods)
	}
	return pr, nil
}

// descriptiveString reads a JSON string for a descriptive fact; anything
// else (absent, null, another type) gives "".
func descriptiveString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// modalityNames turns llama.cpp's input modalities ({"vision":true,
// "audio":false, "video":false}) into rolter's names. Text is always
// served. Keys rolter does not know (e.g. the media-generation server's
// "image_generation", an output) are left out.
func modalityNames(m map[string]bool) []string {
	names := []string{"text"}
	for _, k := range []struct{ key, name string }{
		{"vision", "image"},
		{"audio", "audio"},
		{"video", "video"},
	} {
		if m[k.key] {
			names = append(names, k.name)
		}
	}
	return names
}

// positiveInt reads a JSON integer in [1, maxContext]. An absent key or
// null gives ok false and no error.
func positiveInt(raw json.RawMessage) (n int, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	v, perr := strconv.ParseInt(string(raw), 10, 64)
	if perr != nil || v < 1 || v > maxContext {
		return 0, false, fmt.Errorf("is %s, not a positive integer", truncate(string(raw), 40))
	}
	return int(v), true, nil
}
