package readiness

import (
	"slices"
	"strings"
	"testing"
)

func TestParseModelsContextKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		id         string
		ctx        int
		err        string
	}{
		{"vllm", vllmModels(vllmCard("a", 8192)), "a", 8192, ""},
		{"sglang", sglangModels, "Qwen/Qwen2.5-7B-Instruct", 32768, ""},
		{"llama.cpp runtime n_ctx before n_ctx_train", llamaModels("m", 8192, 32768), "m", 8192, ""},
		{"llama.cpp legacy n_ctx_train only", llamaModelsLegacy, "/models/llama-2-7b.Q4_0.gguf", 4096, ""},
		{"max_model_len first", `{"data":[{"id":"x","context_length":2,"max_model_len":1,"meta":{"n_ctx":3,"n_ctx_train":4}}]}`, "x", 1, ""},
		{"context_length second", `{"data":[{"id":"x","context_length":2,"meta":{"n_ctx":3,"n_ctx_train":4}}]}`, "x", 2, ""},
		{"null skipped", `{"data":[{"id":"x","max_model_len":null,"meta":{"n_ctx":null,"n_ctx_train":4}}]}`, "x", 4, ""},
		{"meta null", `{"data":[{"id":"x","meta":null}]}`, "x", 0, ""},
		{"no context key", `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1,"owned_by":"system"}]}`, "gpt-4o", 0, ""},
		{"float", `{"data":[{"id":"x","max_model_len":8192.0}]}`, "", 0, "max_model_len is 8192.0, not a positive integer"},
		{"negative", `{"data":[{"id":"x","context_length":-1}]}`, "", 0, "context_length is -1"},
		{"huge", `{"data":[{"id":"x","meta":{"n_ctx_train":99999999999}}]}`, "", 0, "meta.n_ctx_train is 99999999999"},
		{"id not string", `{"data":[{"id":7}]}`, "", 0, "malformed model card"},
		{"empty id", `{"data":[{"id":""}]}`, "", 0, "no id"},
		{"data not array", `{"data":{}}`, "", 0, "malformed JSON"},
		{"array at top", `[{"id":"x"}]`, "", 0, "malformed JSON"},
		{"trailing garbage", vllmModels(vllmCard("a", 1)) + "x", "", 0, "malformed JSON"},
		{"two", vllmModels(vllmCard("a", 1), vllmCard("b", 1)), "", 0, "returned 2 models"},
		{"openai list", openaiModels, "", 0, "returned 2 models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc, err := parseModels([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want containing %q", err, tc.err)
				}
				return
			}
			if err != nil || mc.id != tc.id || mc.context != tc.ctx {
				t.Fatalf("got %+v, %v; want id %q context %d", mc, err, tc.id, tc.ctx)
			}
		})
	}
}

func TestParseProps(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       llamaProps
		err        string
	}{
		{"current", llamaPropsBody("m", 8192, 4, true, true, "b1-abc"),
			llamaProps{context: 8192, alias: "m", slots: 4, modalities: []string{"text", "image", "audio"}, build: "b1-abc"}, ""},
		{"legacy", llamaPropsLegacy,
			llamaProps{context: 2048, slots: 1, modalities: []string{"text"}, build: "b5000-8f1d81a0"}, ""},
		{"video", `{"modalities":{"vision":false,"video":true,"audio":false,"image_generation":true}}`,
			llamaProps{modalities: []string{"text", "video"}}, ""},
		{"descriptive fields of the wrong type are dropped", `{"total_slots":"four","modalities":[1],"build_info":7,"default_generation_settings":{"n_ctx":512}}`,
			llamaProps{context: 512}, ""},
		{"auto slots", `{"total_slots":-1}`, llamaProps{}, ""},
		{"empty", `{}`, llamaProps{}, ""},
		{"n_ctx string", `{"default_generation_settings":{"n_ctx":"8192"}}`, llamaProps{}, "n_ctx is \"8192\""},
		{"alias not string", `{"model_alias":["a"]}`, llamaProps{}, "malformed JSON"},
		{"not json", `Loading model`, llamaProps{}, "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProps([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got.context != tc.want.context || got.alias != tc.want.alias || got.slots != tc.want.slots ||
				got.build != tc.want.build || !slices.Equal(got.modalities, tc.want.modalities) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseModels(f *testing.F) {
	for _, s := range []string{
		vllmModels(vllmCard("a", 8192)), sglangModels, sglangModelsOld, llamaModels("m", 1, 2),
		llamaModelsLegacy, openaiModels, anthropicModels, `{"data":[{"id":"x","max_model_len":null}]}`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mc, err := parseModels(body)
		if err != nil {
			if mc != (modelCard{}) {
				t.Fatalf("error %v with a card %+v", err, mc)
			}
			return
		}
		if mc.id == "" || mc.context < 0 || mc.context > maxContext {
			t.Fatalf("accepted %q as %+v", body, mc)
		}
	})
}

func FuzzParseProps(f *testing.F) {
	for _, s := range []string{
		llamaPropsBody("m", 8192, 4, true, false, "b1"), llamaPropsLegacy, `{}`, `{"modalities":{"vision":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pr, err := parseProps(body)
		if err != nil {
			return
		}
		if pr.context < 0 || pr.slots < 0 || (pr.modalities != nil && pr.modalities[0] != "text") {
			t.Fatalf("accepted %q as %+v", body, pr)
		}
	})
}
