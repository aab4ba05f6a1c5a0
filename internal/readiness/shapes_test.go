package readiness

// What the engines actually answer, read from their source (fixtures below
// copy these shapes field for field; the tests in this file drive the cache
// against them).
//
// vLLM (vllm-project/vllm)
//   - GET /v1/models: vllm/entrypoints/openai/engine/protocol.py
//     (older: vllm/entrypoints/openai/protocol.py), filled by
//     OpenAIModelRegistry.show_available_models in
//     vllm/entrypoints/openai/models/serving.py:
//     {"object":"list","data":[ModelCard]}, ModelCard = {id, object:"model",
//     created, owned_by:"vllm", root, parent, max_model_len, permission:
//     [ModelPermission{id:"modelperm-…", object:"model_permission", created,
//     allow_create_engine, allow_sampling, allow_logprobs,
//     allow_search_indices, allow_view, allow_fine_tuning, organization:"*",
//     group, is_blocking}]}. max_model_len = model_config.max_model_len
//     (the served limit, i.e. --max-model-len) on base-model cards; each
//     loaded LoRA adapter adds a card with parent = base name and
//     max_model_len null. So a vLLM with a LoRA loaded lists >1 model and an
//     upstream-metadata provider on it is not ready (by design: ambiguous).
//   - GET /health: vllm/entrypoints/serve/instrumentator/health.py: 200
//     with an empty body; 503 (empty) when the engine is dead (newer
//     versions also while warming up or draining). No JSON.
//
// SGLang (sgl-project/sglang)
//   - GET /v1/models: python/sglang/srt/entrypoints/http_server.py
//     available_models(); ModelCard in
//     python/sglang/srt/entrypoints/openai/protocol.py = {id, object:"model",
//     created, owned_by:"sglang", root, parent (newer versions only),
//     max_model_len}. id and root are served_model_name (default: the model
//     path); max_model_len = tokenizer_manager.model_config.context_len, the
//     effective context (--context-length or the model config's). YES, the
//     SGLang card carries max_model_len: it is SGLang's context key.
//   - GET /get_model_info: {model_path, tokenizer_path, is_generation,
//     preferred_sampling_params, weight_version}: no context length, so the
//     cache does not call it. GET /get_server_info dumps every server arg
//     (context_length there is the CLI override, null when not given) plus
//     scheduler internals and internal_states: large, and not the effective
//     value; not used either.
//   - GET /health (same handler as /health_generate): 503 (empty) while
//     starting or shutting down; otherwise it submits a 1-token generation
//     inside the engine (skipped if the engine is busy), sleeps 1 s, and
//     answers 200 (empty) if the scheduler answered within
//     SGLANG_HEALTH_CHECK_TIMEOUT (20 s), else 503. So an SGLang health
//     probe takes >= 1 s; Config.Timeout (5 s) allows for it.
//
// llama.cpp (ggml-org/llama.cpp, tools/server/server-context.cpp; older
// versions examples/server/server.cpp)
//   - GET /v1/models (and /models, same body): get_res_models():
//     {"models":[Ollama-style entry {name, model, modified_at, size, digest,
//     type, description, tags, capabilities, parameters, details}],
//     "object":"list", "data":[{id, aliases, tags, object:"model", created,
//     owned_by:"llamacpp", meta:{vocab_type, n_vocab, n_ctx, n_ctx_train,
//     n_embd, n_params, size, ftype}}]}. meta.n_ctx is the per-slot runtime
//     context (slot_n_ctx); older versions have meta without n_ctx (and
//     ftype) and no top-level "models"/aliases/tags. id is model_name: the
//     first --alias, else the registry name, else the model FILE NAME.
//     Router mode (no -m) lists every known model with a "status" and no
//     meta: more than one model, hence not ready.
//   - GET /health (and /v1/health): 200 {"status":"ok"}. While the model
//     loads a middleware answers EVERY route (health included) with 503
//     {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}.
//   - GET /props: get_res_props(): {default_generation_settings:{params:
//     {...}, n_ctx}, total_slots, model_alias, model_ftype, model_path,
//     modalities:{vision, video, audio}, media_marker, endpoint_slots,
//     endpoint_props, endpoint_metrics, ui, ui_settings, chat_template,
//     chat_template_caps, bos_token, eos_token, build_info, is_sleeping,
//     cors_proxy_enabled} (+ chat_template_tool_use with jinja). There is
//     no top-level n_ctx: the context is default_generation_settings.n_ctx,
//     the same per-slot value as meta.n_ctx (-c divided among -np slots),
//     which is what llama.cpp enforces, so it wins over meta.n_ctx_train.
//     build_info is "b<build number>-<commit>".
//   - model_alias: in current versions it is the same model_name variable
//     as the /v1/models id, so on a real server they always agree; a
//     mismatch means /props and /v1/models are not answered by the same
//     process (a proxy in front, a model swap between the two reads) and
//     the provider is not ready. Some older versions put the raw --alias
//     there ("" without --alias, while the id was the model path); older
//     still defaulted both to "unknown". So the cache compares only a
//     non-empty model_alias, which equals the id in every version.
//   - Auth: recent versions require the API key on /v1/models and /props
//     (not on /health); Bearer is accepted (x-api-key too).
//
// OpenAI GET /v1/models: {"object":"list","data":[{id, object:"model",
// created, owned_by}]}. Anthropic GET /v1/models (x-api-key,
// anthropic-version: 2023-06-01): {"data":[{type:"model", id,
// display_name, created_at}], has_more, first_id, last_id}.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// vLLM.

const vllmPermission = `[{"id":"modelperm-0c316cdfead64a9599b824b66ab89f18","object":"model_permission","created":1732268408,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]`

func vllmCard(id string, maxModelLen int) string {
	return fmt.Sprintf(`{"id":%q,"object":"model","created":1732268408,"owned_by":"vllm","root":"/models/%s","parent":null,"max_model_len":%d,"permission":%s}`,
		id, id, maxModelLen, vllmPermission)
}

func vllmLoRACard(name, base string) string {
	return fmt.Sprintf(`{"id":%q,"object":"model","created":1732268408,"owned_by":"vllm","root":"/adapters/%s","parent":%q,"max_model_len":null,"permission":%s}`,
		name, name, base, vllmPermission)
}

func vllmModels(cards ...string) string {
	return `{"object":"list","data":[` + strings.Join(cards, ",") + `]}`
}

// SGLang.

const (
	sglangModels = `{"object":"list","data":[{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model","created":1735689600,"owned_by":"sglang","root":"Qwen/Qwen2.5-7B-Instruct","parent":null,"max_model_len":32768}]}`
	// Older SGLang cards have no "parent".
	sglangModelsOld    = `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1722000000,"owned_by":"sglang","root":"meta-llama/Llama-3.1-8B-Instruct","max_model_len":131072}]}`
	sglangGetModelInfo = `{"model_path":"Qwen/Qwen2.5-7B-Instruct","tokenizer_path":"Qwen/Qwen2.5-7B-Instruct","is_generation":true,"preferred_sampling_params":null,"weight_version":"default"}`
)

// llama.cpp.

const (
	llamaHealthOK      = `{"status":"ok"}`
	llamaHealthLoading = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`
)

func llamaModels(id string, nCtx, nCtxTrain int) string {
	return fmt.Sprintf(`{"models":[{"name":%[1]q,"model":%[1]q,"modified_at":"","size":"","digest":"","type":"model","description":"","tags":[""],"capabilities":["completion","multimodal"],"parameters":"","details":{"parent_model":"","format":"gguf","family":"","families":[""],"parameter_size":"","quantization_level":""}}],"object":"list","data":[{"id":%[1]q,"aliases":[],"tags":[],"object":"model","created":1757000000,"owned_by":"llamacpp","meta":{"vocab_type":2,"n_vocab":152064,"n_ctx":%[2]d,"n_ctx_train":%[3]d,"n_embd":3584,"n_params":7615616512,"size":4677120000,"ftype":"Q4_K - Medium"}}]}`,
		id, nCtx, nCtxTrain)
}

func llamaPropsBody(alias string, nCtx, slots int, vision, audio bool, build string) string {
	return fmt.Sprintf(`{"default_generation_settings":{"params":{"seed":4294967295,"temperature":0.8,"dynatemp_range":0.0,"top_k":40,"top_p":0.95,"min_p":0.05,"n_predict":-1,"n_keep":0,"stream":true,"samplers":["penalties","dry","top_k","typ_p","top_p","min_p","xtc","temperature"]},"n_ctx":%[2]d},"total_slots":%[3]d,"model_alias":%[1]q,"model_ftype":"Q4_K - Medium","model_path":"/models/qwen2.5-7b-instruct-q4_k_m.gguf","modalities":{"vision":%[4]t,"video":false,"audio":%[5]t},"media_marker":"<__media__>","endpoint_slots":true,"endpoint_props":false,"endpoint_metrics":false,"ui":true,"ui_settings":{},"chat_template":"{%%- for message in messages %%}{{ message.content }}{%%- endfor %%}","chat_template_caps":{"supports_tools":true,"supports_system_role":true},"bos_token":"<|endoftext|>","eos_token":"<|im_end|>","build_info":%[6]q,"is_sleeping":false,"cors_proxy_enabled":false}`,
		alias, nCtx, slots, vision, audio, build)
}

// Older llama.cpp (examples/server/server.cpp era): the id is the model
// path, meta has only n_ctx_train, /props has model_alias "" without
// --alias and modalities without video.
const (
	llamaModelsLegacy = `{"object":"list","data":[{"id":"/models/llama-2-7b.Q4_0.gguf","object":"model","created":1735000000,"owned_by":"llamacpp","meta":{"vocab_type":1,"n_vocab":32000,"n_ctx_train":4096,"n_embd":4096,"n_params":6738415616,"size":3825065984}}]}`
	llamaPropsLegacy  = `{"default_generation_settings":{"n_ctx":2048,"params":{"n_predict":-1,"seed":4294967295,"temperature":0.8}},"total_slots":1,"model_alias":"","model_path":"/models/llama-2-7b.Q4_0.gguf","modalities":{"vision":false,"audio":false},"chat_template":"","bos_token":"<s>","eos_token":"</s>","build_info":"b5000-8f1d81a0"}`
)

// Hosted APIs.

const (
	openaiModels    = `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"},{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`
	anthropicModels = `{"data":[{"type":"model","id":"claude-sonnet-4-20250514","display_name":"Claude Sonnet 4","created_at":"2025-05-22T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-20250514","last_id":"claude-sonnet-4-20250514"}`
)

func TestVLLMUpstreamFollowsModelSwap(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("model-a", 8192)))
	c, _ := newTestCache(t, Config{})
	var changes countingFn
	c.OnChange(changes.call)
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})

	st := mustStatus(t, c, 1)
	if st.Ready || st.Reason != ReasonNoProbe || !st.LastProbe.IsZero() {
		t.Fatalf("before any probe: %+v, want not ready with %q", st, ReasonNoProbe)
	}

	c.ProbeAll(context.Background())
	st = mustStatus(t, c, 1)
	if !st.Ready || st.Facts.ModelID != "model-a" || st.Facts.Context != 8192 {
		t.Fatalf("after first probe: %+v, want ready model-a/8192", st)
	}
	if changes.n() != 1 {
		t.Fatalf("OnChange calls = %d, want 1", changes.n())
	}

	// An unchanged probe is not a change.
	c.ProbeAll(context.Background())
	if changes.n() != 1 {
		t.Fatalf("OnChange calls after an unchanged probe = %d, want 1", changes.n())
	}

	// The operator replaces the model behind the same endpoint.
	eng.set("/v1/models", 200, vllmModels(vllmCard("model-b", 32768)))
	c.ProbeAll(context.Background())
	st = mustStatus(t, c, 1)
	if !st.Ready || st.Facts.ModelID != "model-b" || st.Facts.Context != 32768 {
		t.Fatalf("after swap: %+v, want ready model-b/32768 at once", st)
	}
	if changes.n() != 2 {
		t.Fatalf("OnChange calls after swap = %d, want 2", changes.n())
	}
	if st.Facts.Modalities != nil || st.Facts.Slots != 0 || st.Facts.Build != "" {
		t.Fatalf("vLLM reports no modalities, slots or build: %+v", st.Facts)
	}
}

func TestVLLMWithLoRAIsAmbiguous(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("base", 8192)))
	c, _ := newTestCache(t, Config{FailAfter: 5})
	var changes countingFn
	c.OnChange(changes.call)
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); !st.Ready {
		t.Fatalf("one model: %+v, want ready", st)
	}

	// Loading an adapter adds a second card: not ready at once, whatever
	// FailAfter says.
	eng.set("/v1/models", 200, vllmModels(vllmCard("base", 8192), vllmLoRACard("sql-lora", "base")))
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 1)
	want := "GET /models returned 2 models; an upstream-metadata provider must serve exactly one"
	if st.Ready || st.Reason != want || st.LastError != want {
		t.Fatalf("two models: %+v, want not ready with %q", st, want)
	}
	if !st.Facts.Equal(Facts{}) {
		t.Fatalf("facts of a not-ready provider must be cleared: %+v", st.Facts)
	}
	if changes.n() != 2 {
		t.Fatalf("OnChange calls = %d, want 2", changes.n())
	}

	eng.set("/v1/models", 200, vllmModels())
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); st.Ready || !strings.Contains(st.Reason, "returned 0 models") {
		t.Fatalf("no models: %+v", st)
	}

	eng.set("/v1/models", 200, vllmModels(vllmCard("base", 8192)))
	c.ProbeAll(context.Background())
	st = mustStatus(t, c, 1)
	if !st.Ready || st.Reason != "" || st.Facts.ModelID != "base" {
		t.Fatalf("back to one model: %+v, want ready", st)
	}
	if !strings.Contains(st.LastError, "returned 0 models") {
		t.Fatalf("LastError must survive recovery: %q", st.LastError)
	}
}

func TestSGLangUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, body, id string
		ctx            int
	}{
		{"current", sglangModels, "Qwen/Qwen2.5-7B-Instruct", 32768},
		{"without parent", sglangModelsOld, "meta-llama/Llama-3.1-8B-Instruct", 131072},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newEngine(t)
			eng.set("/health", 200, "")
			eng.set("/v1/models", 200, tc.body)
			eng.set("/get_model_info", 200, sglangGetModelInfo)
			c, _ := newTestCache(t, Config{})
			c.Sync([]Provider{{ID: 7, Kind: store.KindSGLang, BaseURL: eng.url() + "/v1", Upstream: true}})
			c.ProbeAll(context.Background())
			st := mustStatus(t, c, 7)
			if !st.Ready || st.Facts.ModelID != tc.id || st.Facts.Context != tc.ctx {
				t.Fatalf("%+v, want ready %s/%d", st, tc.id, tc.ctx)
			}
			if n := eng.hits("GET /get_model_info") + eng.hits("GET /get_server_info"); n != 0 {
				t.Fatalf("native info endpoints called %d times; /v1/models has the context", n)
			}
			if got := eng.hits("GET /health"); got != 1 {
				t.Fatalf("GET /health hits = %d, want 1", got)
			}
		})
	}
}

func TestLlamaCppUpstream(t *testing.T) {
	const id = "qwen2.5-7b-instruct-q4_k_m.gguf"
	eng := newEngine(t)
	eng.set("/health", 200, llamaHealthOK)
	// meta.n_ctx_train is 32768 but -c 32768 -np 4 leaves 8192 per slot.
	eng.set("/v1/models", 200, llamaModels(id, 8192, 32768))
	eng.set("/props", 200, llamaPropsBody(id, 8192, 4, true, false, "b6400-5d3a8b12"))
	c, _ := newTestCache(t, Config{})
	c.Sync([]Provider{{ID: 3, Kind: store.KindLlamaCpp, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())

	st := mustStatus(t, c, 3)
	// Design 003: "llama.cpp may additionally supply n_ctx, quantization,
	// build, slots, and modalities through a bounded /props read".
	want := Facts{ModelID: id, Context: 8192, Modalities: []string{"text", "image"}, Slots: 4, Build: "b6400-5d3a8b12", Quantization: "Q4_K_M"}
	if !st.Ready || !st.Facts.Equal(want) {
		t.Fatalf("got %+v, want ready with %+v", st, want)
	}

	// /props n_ctx is the runtime context: it wins over the card's.
	eng.set("/props", 200, llamaPropsBody(id, 4096, 8, false, true, "b6401-0000000"))
	c.ProbeAll(context.Background())
	st = mustStatus(t, c, 3)
	want = Facts{ModelID: id, Context: 4096, Modalities: []string{"text", "audio"}, Slots: 8, Build: "b6401-0000000", Quantization: "Q4_K_M"}
	if !st.Ready || !st.Facts.Equal(want) {
		t.Fatalf("got %+v, want ready with %+v", st, want)
	}
}

func TestLlamaCppLegacyShapes(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, llamaHealthOK)
	eng.set("/v1/models", 200, llamaModelsLegacy)
	eng.set("/props", 200, llamaPropsLegacy)
	c, _ := newTestCache(t, Config{})
	c.Sync([]Provider{{ID: 3, Kind: store.KindLlamaCpp, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 3)
	// model_alias "" is not compared; n_ctx comes from /props, not n_ctx_train.
	// No model_ftype nor meta.ftype: the quantization is the GGUF file
	// name's (design 003, quantization from /props).
	want := Facts{ModelID: "/models/llama-2-7b.Q4_0.gguf", Context: 2048, Modalities: []string{"text"}, Slots: 1, Build: "b5000-8f1d81a0", Quantization: "Q4_0"}
	if !st.Ready || !st.Facts.Equal(want) {
		t.Fatalf("got %+v, want ready with %+v", st, want)
	}
}

func TestLlamaCppAliasMismatch(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, llamaHealthOK)
	eng.set("/v1/models", 200, llamaModels("coder", 8192, 32768))
	eng.set("/props", 200, llamaPropsBody("coder", 8192, 1, false, false, "b1"))
	c, _ := newTestCache(t, Config{FailAfter: 3})
	c.Sync([]Provider{{ID: 3, Kind: store.KindLlamaCpp, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 3); !st.Ready {
		t.Fatalf("%+v, want ready", st)
	}

	eng.set("/props", 200, llamaPropsBody("chat", 8192, 1, false, false, "b1"))
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 3)
	want := `/props model_alias "chat" disagrees with /v1/models id "coder"`
	if st.Ready || st.Reason != want {
		t.Fatalf("%+v, want not ready at once with %q", st, want)
	}
}

func TestLlamaCppLoading(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, llamaHealthOK)
	eng.set("/v1/models", 200, llamaModels("m", 8192, 8192))
	eng.set("/props", 200, llamaPropsBody("m", 8192, 1, false, false, "b1"))
	c, _ := newTestCache(t, Config{FailAfter: 2})
	c.Sync([]Provider{{ID: 3, Kind: store.KindLlamaCpp, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 3); !st.Ready {
		t.Fatalf("%+v, want ready", st)
	}

	// The server restarts to load a new model: every route answers 503.
	for _, p := range []string{"/health", "/v1/models", "/props"} {
		eng.set(p, 503, llamaHealthLoading)
	}
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 3)
	if !st.Ready || !strings.Contains(st.LastError, "Loading model") {
		t.Fatalf("after one failure: %+v, want still ready (FailAfter 2) with the error recorded", st)
	}
	c.ProbeAll(context.Background())
	st = mustStatus(t, c, 3)
	want := "health probe failed: GET /health: returned 503: Loading model"
	if st.Ready || st.Reason != want {
		t.Fatalf("after two failures: %+v, want not ready with %q", st, want)
	}
	if n := eng.hits("GET /v1/models"); n != 1 {
		t.Fatalf("/v1/models asked %d times; an unhealthy server must not be asked for metadata", n)
	}
}

func TestHostedAPIsProbeModels(t *testing.T) {
	for _, tc := range []struct {
		kind, body string
		header     string
		want       string
	}{
		{store.KindOpenAI, openaiModels, "Authorization", "Bearer sk-test-0123456789"},
		{store.KindAnthropic, anthropicModels, "X-Api-Key", "sk-test-0123456789"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			eng := newEngine(t)
			eng.set("/v1/models", 200, tc.body)
			c, _ := newTestCache(t, Config{})
			c.Sync([]Provider{{ID: 1, Kind: tc.kind, BaseURL: eng.url() + "/v1", Credential: secretKey}})
			c.ProbeAll(context.Background())
			if st := mustStatus(t, c, 1); !st.Ready || !st.LastProbe.Equal(testEpoch) {
				t.Fatalf("%+v, want ready probed at %v", st, testEpoch)
			}
			h := eng.lastHeaders("GET /v1/models")
			if got := h.Get(tc.header); got != tc.want {
				t.Fatalf("%s = %q, want %q", tc.header, got, tc.want)
			}
			if tc.kind == store.KindAnthropic {
				if h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Authorization") != "" {
					t.Fatalf("anthropic headers: %v", h)
				}
			}
		})
	}
}
