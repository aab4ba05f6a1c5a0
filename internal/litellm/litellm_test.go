package litellm_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"

	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/testkit"
)

// Key secrets of testdata/litellm.yaml: the literal one, and those
// testEnv puts in the environment for os.environ/. None may ever appear in
// output, warnings or errors.
const (
	openAIKey    = "sk-litellm-test-openai-0001"
	secondKey    = "sk-litellm-test-second-0002"
	vllmKey      = "sk-litellm-test-vllm-0003"
	anthropicKey = "sk-litellm-test-anthropic-0004"
	masterKey    = "sk-litellm-master-never-imported"
)

var allSecrets = []string{openAIKey, secondKey, vllmKey, anthropicKey, masterKey,
	proxyOpenAIKey, proxyVLLMKey, proxyAnthropicKey, proxyAzureKey, proxyCatchAllKey, proxyMasterKey,
	proxyRotatedKey, proxyRotatedOAI, proxyManualKey}

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

var testVars = map[string]string{
	"LITELLM_TEST_OPENAI_KEY":    openAIKey,
	"LITELLM_TEST_VLLM_KEY":      vllmKey,
	"LITELLM_TEST_ANTHROPIC_KEY": anthropicKey,
	"LITELLM_TEST_EMPTY":         "",
}

func assertNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	testkit.AssertNoSecrets(t, what, s, allSecrets...)
}

func parseFile(t *testing.T, path string) *litellm.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := litellm.Parse(b, env(testVars))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// entryView is an Entry with the key revealed, for comparison.
type entryView struct {
	Index                                   int
	ModelName, Kind, BaseURL, Key, Upstream string
	Weight                                  int
}

func TestParseRealistic(t *testing.T) {
	cfg := parseFile(t, "testdata/litellm.yaml")
	var got []entryView
	for _, e := range cfg.Entries {
		got = append(got, entryView{e.Index, e.ModelName, e.Kind, e.BaseURL, e.Key.Reveal(), e.UpstreamModel, e.Weight})
	}
	want := []entryView{
		{0, "gpt-4o", "openai", "https://api.openai.com/v1", openAIKey, "gpt-4o", 1},
		{1, "gpt-4o", "openai", "https://api.openai.com/v1", secondKey, "gpt-4o", 2},
		{2, "qwen3", "vllm", "http://10.0.0.5:8000/v1", vllmKey, "Qwen/Qwen3-8B", 1},
		{3, "qwen3", "vllm", "http://10.0.0.6:8000/v1", "", "Qwen/Qwen3-8B", 3},
		{4, "claude-sonnet", "anthropic", "https://api.anthropic.com/v1", anthropicKey, "claude-sonnet-4-5", 1},
		{5, "gpt-4o-mini", "openai", "https://api.openai.com/v1", secondKey, "gpt-4o-mini", 1},
		{6, "llama", "llamacpp", "http://gpu-3.lan:8080/v1", "", "llama-3.1-8b", 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %+v\nwant %+v", got, want)
	}
	// One line per setting that is not carried over, by name; model_info.id
	// is read (the import identity), and rpm/tpm are not carried over here
	// because each route has a deployment without them.
	wantWarn := []string{
		"ignored general_settings.master_key: rolter has no master key: admin tokens guard the admin API (ROLTER_ADMIN_TOKEN, /admin/v1/tokens) and clients use virtual keys",
		"ignored litellm_settings.drop_params: no rolter equivalent",
		"ignored litellm_settings.num_retries: rolter retries a failed request on the route's other targets itself (docs/data-path.md)",
		"ignored router_settings.routing_strategy: each rolter route balances its targets by its own strategy (weighted, round_robin, least_busy or latency)",
		"ignored litellm_params.rpm in model_list[0] (route gpt-4o: model_list[1] sets no rpm, so the deployments have no total to carry over; set rpm_limit on the route or on keys)",
		"ignored litellm_params.rpm in model_list[3] (route qwen3: model_list[2] sets no rpm, so the deployments have no total to carry over; set rpm_limit on the route or on keys)",
		"ignored litellm_params.timeout in model_list[2] (set first_byte_timeout and idle_timeout on the provider)",
		"ignored litellm_params.tpm in model_list[0] (route gpt-4o: model_list[1] sets no tpm, so the deployments have no total to carry over; set tpm_limit on the route or on keys)",
	}
	if !reflect.DeepEqual(cfg.Warnings, wantWarn) {
		t.Errorf("warnings:\n got %q\nwant %q", cfg.Warnings, wantWarn)
	}
	assertNoSecrets(t, "warnings", strings.Join(cfg.Warnings, "\n"))
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"empty file", "", []string{"empty"}},
		{"no model_list", "litellm_settings: {}\n", []string{"no model_list"}},
		{"two documents", "model_list: []\n---\nmodel_list: []\n", []string{"one YAML document"}},
		{"model_list not a list", "model_list: 3\n", []string{"line 1"}},
		{"missing model_name", "model_list:\n- litellm_params: {model: openai/gpt-4o}\n",
			[]string{"model_list[0]: model_name is required"}},
		{"model_name with space", "model_list:\n- model_name: gpt 4o\n  litellm_params: {model: openai/gpt-4o}\n",
			[]string{`model_list[0] (model_name "gpt 4o"): model_name must not contain whitespace`}},
		{"missing litellm_params", "model_list:\n- model_name: a\n",
			[]string{`model_list[0] (model_name "a"): litellm_params is required`}},
		{"missing model", "model_list:\n- model_name: a\n  litellm_params: {api_base: http://h/v1}\n",
			[]string{"litellm_params.model: is required"}},
		{"prefix without model", "model_list:\n- model_name: a\n  litellm_params: {model: hosted_vllm/, api_base: http://h/v1}\n",
			[]string{"litellm_params.model: names no model after hosted_vllm/"}},
		{"rpm not whole", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, rpm: 0}\n",
			[]string{"litellm_params.rpm must be a whole number from 1 to 1000000000"}},
		{"tpm fractional", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, tpm: 2.5}\n",
			[]string{"litellm_params.tpm must be a whole number"}},
		{"empty env name", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_key: os.environ/}\n",
			[]string{"litellm_params.api_key: os.environ/ names no environment variable"}},
		{"vllm without api_base", "model_list:\n- model_name: ok\n  litellm_params: {model: openai/gpt-4o}\n- model_name: q\n  litellm_params: {model: hosted_vllm/Qwen/Qwen3-8B}\n",
			[]string{`model_list[1] (model_name "q"): litellm_params.api_base: is required for vllm servers`}},
		{"sglang without api_base", "model_list:\n- model_name: q\n  litellm_params: {model: sglang/q}\n",
			[]string{"is required for sglang servers"}},
		{"relative api_base", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_base: 10.0.0.5:8000/v1}\n",
			[]string{"api_base: must be an absolute http:// or https:// URL"}},
		{"metadata api_base", "model_list:\n- model_name: a\n  litellm_params: {model: hosted_vllm/a, api_base: 'http://169.254.169.254/v1'}\n",
			[]string{"api_base: host is a link-local address"}},
		{"api_base with query", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_base: 'http://h/v1?x=1'}\n",
			[]string{"must not have a query"}},
		{"unset env", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_key: os.environ/LITELLM_TEST_UNSET}\n",
			[]string{"litellm_params.api_key: environment variable LITELLM_TEST_UNSET is not set"}},
		{"empty env", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_key: os.environ/LITELLM_TEST_EMPTY}\n",
			[]string{"environment variable LITELLM_TEST_EMPTY is not set"}},
		{"env api_base unset", "model_list:\n- model_name: a\n  litellm_params: {model: hosted_vllm/a, api_base: os.environ/LITELLM_TEST_UNSET}\n",
			[]string{"litellm_params.api_base: environment variable LITELLM_TEST_UNSET is not set"}},
		{"fractional weight", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, weight: 1.5}\n",
			[]string{"litellm_params.weight must be a whole number"}},
		{"negative weight", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a, weight: -1}\n",
			[]string{"litellm_params.weight must be a whole number"}},
		{"every bad entry named", "model_list:\n- model_name: a\n  litellm_params: {model: openai/a}\n- model_name: b\n- litellm_params: {model: openai/c}\n- model_name: d\n  litellm_params: {model: vllm/d}\n",
			[]string{"model_list[1]", "model_list[2]", "model_list[3]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := litellm.Parse([]byte(tc.yaml), env(testVars))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestParseErrorsHideSecrets: neither a literal key of a bad entry nor a
// password in api_base reaches the error.
func TestParseErrorsHideSecrets(t *testing.T) {
	y := "model_list:\n" +
		"- model_name: a b\n  litellm_params: {model: openai/a, api_key: " + secondKey + "}\n" +
		"- model_name: c\n  litellm_params: {model: openai/c, api_base: 'http://u:" + masterKey + "@h/v1', api_key: " + openAIKey + "}\n"
	_, err := litellm.Parse([]byte(y), env(testVars))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if !strings.Contains(err.Error(), "must not carry credentials") {
		t.Errorf("error %q does not refuse credentials in api_base", err)
	}
	assertNoSecrets(t, "error", err.Error())
}

// TestParseKeyIsSecret: however an entry is printed, its key shows as
// <secret>.
func TestParseKeyIsSecret(t *testing.T) {
	cfg, err := litellm.Parse([]byte("model_list:\n- model_name: a\n  litellm_params: {model: openai/a, api_key: "+secondKey+"}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Entries[0]
	if e.Key.Reveal() != secondKey {
		t.Fatalf("key not parsed")
	}
	s := fmt.Sprintf("%v %+v %#v %s", cfg, cfg.Entries, e, e.Key)
	assertNoSecrets(t, "printed config", s)
	if !strings.Contains(s, secret.Redacted) {
		t.Errorf("printed config shows no %s: %s", secret.Redacted, s)
	}
}

func TestSplitModel(t *testing.T) {
	for _, tc := range []struct {
		model, kind, upstream, err string
	}{
		{"openai/gpt-4o", "openai", "gpt-4o", ""},
		{"openai/Qwen/Qwen3-8B", "openai", "Qwen/Qwen3-8B", ""},
		{"hosted_vllm/Qwen/Qwen3-8B", "vllm", "Qwen/Qwen3-8B", ""},
		{"vllm/meta-llama/Llama-3.1-8B", "vllm", "meta-llama/Llama-3.1-8B", ""},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", ""},
		{"sglang/deepseek-ai/DeepSeek-V3", "sglang", "deepseek-ai/DeepSeek-V3", ""},
		{"llamacpp/llama", "llamacpp", "llama", ""},
		{"llama_cpp/llama", "llamacpp", "llama", ""},
		{"llamafile/llama", "llamacpp", "llama", ""},
		{"ollama/llama3.1", "openai", "llama3.1", ""},
		{"ollama_chat/qwen3:8b", "openai", "qwen3:8b", ""},
		{"lm_studio/qwen3", "openai", "qwen3", ""},
		{"gpt-4o", "openai", "gpt-4o", ""},                                               // no prefix
		{"Qwen/Qwen3-8B", "", "", "unsupported: Qwen/ is not a LiteLLM provider prefix"}, // LiteLLM refuses it too
		{"OpenAI/gpt-4o", "", "", "unsupported: prefixes are lower case"},
		{"azure/gpt-4o", "", "", "unsupported: LiteLLM provider azure/"},          // no rolter kind
		{"bedrock/anthropic.claude", "", "", "unsupported: no rolter equivalent"}, //
		{"openai/", "", "", "names no model after openai/"},
		{"", "", "", "is required"},
	} {
		kind, upstream, err := litellm.SplitModel(tc.model)
		if tc.err != "" {
			want, isUnsupported := strings.CutPrefix(tc.err, "unsupported: ")
			var ue *litellm.UnsupportedError
			if err == nil || !strings.Contains(err.Error(), want) || errors.As(err, &ue) != isUnsupported {
				t.Errorf("SplitModel(%q) error = %v, want %q", tc.model, err, tc.err)
			}
			continue
		}
		if err != nil || kind != tc.kind || upstream != tc.upstream {
			t.Errorf("SplitModel(%q) = %q, %q, %v; want %q, %q", tc.model, kind, upstream, err, tc.kind, tc.upstream)
		}
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct {
		kind, apiBase, want, err string
	}{
		{"openai", "", "https://api.openai.com/v1", ""},
		{"anthropic", "", "https://api.anthropic.com/v1", ""},
		{"vllm", "", "", "is required for vllm servers"},
		{"sglang", "", "", "is required for sglang servers"},
		{"llamacpp", "", "", "is required for llamacpp servers"},
		{"openai", "http://10.0.0.5:8000/v1/", "http://10.0.0.5:8000/v1", ""},
		{"openai", "https://api.groq.com/openai/v1", "https://api.groq.com/openai/v1", ""},
		{"vllm", "http://10.0.0.5:8000", "http://10.0.0.5:8000", ""}, // taken as given
		// LiteLLM's anthropic api_base is the host; rolter's ends in /v1.
		{"anthropic", "https://api.anthropic.com", "https://api.anthropic.com/v1", ""},
		{"anthropic", "https://proxy.lan/", "https://proxy.lan/v1", ""},
		{"anthropic", "https://proxy.lan/v1/messages", "https://proxy.lan/v1", ""},
		{"anthropic", "https://proxy.lan/anthropic/v1", "https://proxy.lan/anthropic/v1", ""},
		{"openai", "ftp://h/v1", "", "absolute http"},
		{"openai", "http://u:p@h/v1", "", "credentials"},
		{"openai", "http://h/v1#x", "", "query or fragment"},
	} {
		got, err := litellm.BaseURL(tc.kind, tc.apiBase)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("BaseURL(%q, %q) error = %v, want %q", tc.kind, tc.apiBase, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("BaseURL(%q, %q) = %q, %v; want %q", tc.kind, tc.apiBase, got, err, tc.want)
		}
	}
}

func TestProviderName(t *testing.T) {
	for _, tc := range []struct{ kind, base, name, slug string }{
		{"openai", "https://api.openai.com/v1", "openai api.openai.com/v1", "openai-api-openai-com-v1"},
		{"vllm", "http://10.0.0.5:8000/v1", "vllm 10.0.0.5:8000/v1", "vllm-10-0-0-5-8000-v1"},
		{"vllm", "http://10.0.0.5:8000", "vllm 10.0.0.5:8000", "vllm-10-0-0-5-8000"},
		{"anthropic", "https://API.Anthropic.com/v1", "anthropic api.anthropic.com/v1", "anthropic-api-anthropic-com-v1"},
		{"sglang", "http://[::1]:30000/v1", "sglang [::1]:30000/v1", "sglang-1-30000-v1"},
		{"llamacpp", "http://gpu-3.lan:8080/v1", "llamacpp gpu-3.lan:8080/v1", "llamacpp-gpu-3-lan-8080-v1"},
	} {
		name := litellm.ProviderName(tc.kind, tc.base)
		if name != tc.name {
			t.Errorf("ProviderName(%q, %q) = %q, want %q", tc.kind, tc.base, name, tc.name)
		}
		if s := admin.BaseSlug(name); s != tc.slug {
			t.Errorf("admin.BaseSlug(%q) = %q, want %q", name, s, tc.slug)
		}
	}
	long := litellm.ProviderName("openai", "https://h/"+strings.Repeat("p", 300))
	if len(long) != 200 || !strings.HasPrefix(long, "openai h/ppp") {
		t.Errorf("a long name is not cut to 200 bytes: %d %q", len(long), long)
	}
}
