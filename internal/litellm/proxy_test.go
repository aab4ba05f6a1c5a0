package litellm_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Secrets of testdata/proxy.yaml: those proxyVars puts in the environment,
// the one its environment_variables block holds, and its master key.
const (
	proxyOpenAIKey    = "sk-proxy-test-openai-0001"
	proxyVLLMKey      = "sk-proxy-test-vllm-0002"
	proxyAnthropicKey = "sk-proxy-test-anthropic-0003"
	proxyAzureKey     = "sk-proxy-test-azure-0004"
	proxyCatchAllKey  = "sk-proxy-test-catchall-0005"
	proxyMasterKey    = "sk-proxy-master-never-imported"
	proxyRotatedKey   = "sk-proxy-test-vllm-rotated-0006"
	proxyRotatedOAI   = "sk-proxy-test-openai-rotated-0007"
	proxyManualKey    = "sk-proxy-test-added-by-hand-0008"
)

func proxyVars() map[string]string {
	return map[string]string{
		"PROXY_TEST_OPENAI_KEY":    proxyOpenAIKey,
		"PROXY_TEST_VLLM_KEY":      proxyVLLMKey,
		"PROXY_TEST_ANTHROPIC_KEY": proxyAnthropicKey,
		"PROXY_TEST_AZURE_KEY":     proxyAzureKey,
	}
}

func readProxy(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseProxy(t *testing.T, vars map[string]string) *litellm.Config {
	t.Helper()
	cfg, err := litellm.Parse(readProxy(t), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// What testdata/proxy.yaml imports to.
var (
	proxyProviders = []provRow{
		{"openai-api-openai-com-v1", "openai api.openai.com/v1", "openai", "https://api.openai.com/v1", proxyOpenAIKey},
		{"vllm-10-0-0-5-8000-v1", "vllm 10.0.0.5:8000/v1", "vllm", "http://10.0.0.5:8000/v1", proxyVLLMKey},
		{"vllm-10-0-0-6-8000-v1", "vllm 10.0.0.6:8000/v1", "vllm", "http://10.0.0.6:8000/v1", proxyVLLMKey},
		{"ollama-10-0-0-7-11434-v1", "ollama 10.0.0.7:11434/v1", "openai", "http://10.0.0.7:11434/v1", ""},
		{"ollama-chat-localhost-11434-v1", "ollama_chat localhost:11434/v1", "openai", "http://localhost:11434/v1", ""},
		{"openai-gpu-3-lan-8080-v1", "openai gpu-3.lan:8080/v1", "openai", "http://gpu-3.lan:8080/v1", ""},
		{"anthropic-api-anthropic-com-v1", "anthropic api.anthropic.com/v1", "anthropic", "https://api.anthropic.com/v1", proxyAnthropicKey},
		{"openai-llm-example-com-v1", "openai llm.example.com/v1", "openai", "https://llm.example.com/v1", proxyCatchAllKey},
	}
	proxyRoutes = map[string]routeRow{
		"gpt-4o":        {[]string{"openai-api-openai-com-v1/gpt-4o*1"}, 500, 200000, []string{"claude-sonnet", "ctx:claude-sonnet"}},
		"qwen3":         {[]string{"vllm-10-0-0-5-8000-v1/Qwen/Qwen3-8B*1", "vllm-10-0-0-6-8000-v1/Qwen/Qwen3-8B*2"}, 100, 150000, []string{"gpt-4o", "llama3"}},
		"llama3":        {[]string{"ollama-10-0-0-7-11434-v1/llama3.1:8b*1"}, 0, 0, nil},
		"llama3-local":  {[]string{"ollama-chat-localhost-11434-v1/llama3.1:8b*1"}, 0, 0, nil},
		"gemma":         {[]string{"openai-gpu-3-lan-8080-v1/gemma-3-12b*1"}, 0, 0, nil},
		"claude-sonnet": {[]string{"anthropic-api-anthropic-com-v1/claude-sonnet-4-5*1"}, 0, 0, nil},
	}
	proxyGroups = map[string][]string{
		"openai":    {"openai-api-openai-com-v1*1"},
		"anthropic": {"anthropic-api-anthropic-com-v1*1"},
	}
	// The skipped entries, as the report's CSV lines read.
	proxySkipped = [][]string{
		{"1", "gpt-4o", "LiteLLM provider azure/ has no rolter equivalent; rolter imports anthropic/, hosted_vllm/, llama_cpp/, llamacpp/, llamafile/, lm_studio/, ollama/, ollama_chat/, openai/, sglang/, vllm/ (for another OpenAI-compatible service write openai/<model> with its api_base)"},
		{"10", "claude-bedrock", "LiteLLM provider bedrock/ has no rolter equivalent; rolter imports anthropic/, hosted_vllm/, llama_cpp/, llamacpp/, llamafile/, lm_studio/, ollama/, ollama_chat/, openai/, sglang/, vllm/ (for another OpenAI-compatible service write openai/<model> with its api_base)"},
		{"11", "gpt-4-family", `litellm_params.model "openai/gpt-4*" is a wildcard but model_name is not; rolter routes a model_name to fixed upstream models`},
	}
	// One warning per setting not carried over, by name; no value.
	proxyWarnings = []string{
		"ignored general_settings.database_url: rolter keeps its state in its own store (--store)",
		"ignored general_settings.master_key: rolter has no master key: admin tokens guard the admin API (ROLTER_ADMIN_TOKEN, /admin/v1/tokens) and clients use virtual keys",
		"ignored litellm_settings.drop_params: no rolter equivalent",
		"ignored litellm_settings.success_callback: no rolter equivalent",
		"ignored router_settings.num_retries: rolter retries a failed request on the route's other targets itself (docs/data-path.md)",
		"ignored router_settings.redis_host: rolter shares rate-limit counters between replicas through --redis",
		"ignored router_settings.redis_password: rolter shares rate-limit counters between replicas through --redis",
		"ignored router_settings.routing_strategy: each rolter route balances its targets by its own strategy (weighted, round_robin, least_busy or latency)",
		"ignored litellm_params.max_parallel_requests in model_list[12] (a provider's policy max_concurrency bounds its concurrent requests)",
	}
)

type routeRow struct {
	Targets  []string
	RPM, TPM int
	// Fallbacks are the route's fallbacks, then "ctx:" and its context
	// fallback (issue 19).
	Fallbacks []string
}

func (h *harness) routeRows(t *testing.T, org, project string) map[string]routeRow {
	t.Helper()
	ctx := context.Background()
	pj, err := h.db.GetProject(ctx, mustOrg(t, h, org).ID, project)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := h.db.ListRoutes(ctx, pj.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]routeRow{}
	for _, r := range rs {
		row := routeRow{RPM: r.RPMLimit, TPM: r.TPMLimit}
		for _, tg := range r.Targets {
			row.Targets = append(row.Targets, tg.ProviderSlug+"/"+tg.UpstreamModel+"*"+itoa(tg.Weight))
		}
		row.Fallbacks = r.Fallbacks
		if r.ContextFallback != "" {
			row.Fallbacks = append(row.Fallbacks, "ctx:"+r.ContextFallback)
		}
		out[r.Model] = row
	}
	return out
}

func (h *harness) groupRows(t *testing.T, org string) map[string][]string {
	t.Helper()
	gs, err := h.db.ListGroups(context.Background(), mustOrg(t, h, org).ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, g := range gs {
		for _, m := range g.Members {
			out[g.Slug] = append(out[g.Slug], m.ProviderSlug+"*"+itoa(m.Weight))
		}
	}
	return out
}

func itoa[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// section parses the CSV lines that follow header in out, up to the next
// line that is not part of it.
func section(t *testing.T, out, header string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(out, header+"\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if l == "" || strings.HasSuffix(l, ":") || strings.HasPrefix(l, "created ") || strings.HasPrefix(l, "dry run:") {
			break
		}
		lines = append(lines, l)
	}
	r := csv.NewReader(strings.NewReader(strings.Join(lines, "\n")))
	r.TrimLeadingSpace = true
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v\n%s", header, err, out)
	}
	return recs
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, w := range lines {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestProxyImport imports a realistic LiteLLM proxy config: the
// unsupported entries are skipped and listed, wildcards become groups or
// provider addresses, rpm/tpm become route limits, every other setting is
// named in a warning, and a second run changes nothing.
func TestProxyImport(t *testing.T) {
	cfg := parseProxy(t, proxyVars())
	if !reflect.DeepEqual(cfg.Warnings, proxyWarnings) {
		t.Errorf("warnings:\n got %q\nwant %q", cfg.Warnings, proxyWarnings)
	}
	assertNoSecrets(t, "warnings", strings.Join(cfg.Warnings, "\n"))
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, cfg, litellm.Options{})
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, proxyProviders) {
			t.Errorf("providers:\n got %+v\nwant %+v", got, proxyProviders)
		}
		if got := h.routeRows(t, "default", "default"); !reflect.DeepEqual(got, proxyRoutes) {
			t.Errorf("routes:\n got %+v\nwant %+v", got, proxyRoutes)
		}
		if got := h.groupRows(t, "default"); !reflect.DeepEqual(got, proxyGroups) {
			t.Errorf("groups:\n got %v\nwant %v", got, proxyGroups)
		}
		// A key from os.environ/NAME records NAME, as rolter export names it.
		for slug, ref := range map[string]string{"openai-api-openai-com-v1": "PROXY_TEST_OPENAI_KEY", "vllm-10-0-0-6-8000-v1": "PROXY_TEST_VLLM_KEY",
			"openai-llm-example-com-v1": "PROXY_TEST_CATCHALL_KEY"} {
			if p := mustProvider(t, h, "default", slug); len(p.Keys) != 1 || p.Keys[0].Ref != ref {
				t.Errorf("provider %s keys %+v, want one with ref %s", slug, p.Keys, ref)
			}
		}
		if got := section(t, out, litellm.SkippedHeader); !reflect.DeepEqual(got, proxySkipped) {
			t.Errorf("skipped:\n got %q\nwant %q\n%s", got, proxySkipped, out)
		}
		wantLines(t, out,
			"created provider ollama-10-0-0-7-11434-v1: kind openai, base_url http://10.0.0.7:11434/v1, no key\n",
			"created group openai for openai/*: openai-api-openai-com-v1 weight 1 (clients ask for openai/<model>)\n",
			"created group anthropic for anthropic/*: anthropic-api-anthropic-com-v1 weight 1 (clients ask for anthropic/<model>)\n",
			"created route gpt-4o: openai-api-openai-com-v1/gpt-4o weight 1; rpm_limit 500, tpm_limit 200000, fallbacks claude-sonnet, context fallback claude-sonnet\n",
			"created route qwen3: vllm-10-0-0-5-8000-v1/Qwen/Qwen3-8B weight 1, vllm-10-0-0-6-8000-v1/Qwen/Qwen3-8B weight 2; rpm_limit 100, tpm_limit 150000, fallbacks gpt-4o, llama3\n",
			`model_list[9] (model_name "*"): rolter has no catch-all address; its models are reachable as openai-llm-example-com-v1/<model>`+"\n",
		)
		if !strings.HasSuffix(out, "created 8 providers, 6 routes, 2 groups; skipped 0 providers, 0 routes (already present); 3 entries not imported\n") {
			t.Errorf("summary:\n%s", out)
		}
		if strings.Contains(out, litellm.UnsetHeader) || strings.Contains(out, "*\"") && strings.Contains(out, "weight 1, *") {
			t.Errorf("unexpected output:\n%s", out)
		}
		for _, r := range h.routeRows(t, "default", "default") {
			for _, tg := range r.Targets {
				if strings.HasSuffix(strings.TrimSuffix(tg, "*1"), "/*") {
					t.Errorf("a route has upstream model *: %v", r)
				}
			}
		}

		again := h.run(t, cfg, litellm.Options{})
		if strings.Contains(again, "created provider") || strings.Contains(again, "updated provider") || strings.Contains(again, "created group") {
			t.Errorf("second run changed something:\n%s", again)
		}
		wantLines(t, again, "provider openai-api-openai-com-v1 exists (imported before): unchanged\n", "group openai exists: left unchanged\n")
		if !strings.HasSuffix(again, "created 0 providers, 0 routes; skipped 8 providers, 6 routes, 2 groups (already present); 3 entries not imported\n") {
			t.Errorf("second run summary:\n%s", again)
		}
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, proxyProviders) {
			t.Errorf("providers after the second run:\n got %+v", got)
		}
	})
}

// TestProxyStrict: with Strict, a file with skipped entries is refused as
// a whole; nothing is written and the report still lists them.
func TestProxyStrict(t *testing.T) {
	cfg := parseProxy(t, proxyVars())
	each(t, func(t *testing.T, h *harness) {
		var out bytes.Buffer
		err := litellm.Run(context.Background(), h.db, h.svc, cfg, litellm.Options{Strict: true}, &out)
		if !errors.Is(err, litellm.ErrStrict) || !strings.Contains(err.Error(), "3 entries skipped (model_list[1], model_list[10], model_list[11]); nothing written") {
			t.Fatalf("Run: %v", err)
		}
		if o, p, r := h.counts(t); o+p+r != 0 {
			t.Errorf("a strict refusal wrote %d orgs, %d providers, %d routes", o, p, r)
		}
		if got := section(t, out.String(), litellm.SkippedHeader); !reflect.DeepEqual(got, proxySkipped) {
			t.Errorf("skipped:\n got %q\n%s", got, out.String())
		}
		if !strings.HasSuffix(out.String(), "; 3 entries not imported; nothing written\n") {
			t.Errorf("report:\n%s", out.String())
		}
		assertNoSecrets(t, "output", out.String()+err.Error())

		// A file without unsupported entries passes --strict.
		ok := parseFile(t, "testdata/litellm.yaml")
		if err := litellm.Run(context.Background(), h.db, h.svc, ok, litellm.Options{Strict: true}, &out); err != nil {
			t.Errorf("strict import of a clean file: %v", err)
		}
	})
}

// TestProxyDryRunWithoutSecrets: a dry run needs no variable set. It
// lists the unset ones, plans the providers by the variables' names, and
// writes nothing; after a real import it still recognises every provider
// by its import identity, though it cannot read a key.
func TestProxyDryRunWithoutSecrets(t *testing.T) {
	if _, err := litellm.Parse(readProxy(t), env(nil)); err == nil ||
		!strings.Contains(err.Error(), "model_list[0] (model_name \"gpt-4o\"): litellm_params.api_key: environment variable PROXY_TEST_OPENAI_KEY is not set") {
		t.Fatalf("Parse without the variables: %v", err)
	}
	dry, err := litellm.ParseDryRun(readProxy(t), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantUnset := []litellm.UnsetVar{
		{Name: "PROXY_TEST_ANTHROPIC_KEY", Fields: []string{"model_list[8].litellm_params.api_key", "model_list[12].litellm_params.api_key"}},
		{Name: "PROXY_TEST_OPENAI_KEY", Fields: []string{"model_list[0].litellm_params.api_key", "model_list[7].litellm_params.api_key"}},
		{Name: "PROXY_TEST_VLLM_KEY", Fields: []string{"model_list[2].litellm_params.api_key", "model_list[3].litellm_params.api_key"}},
	}
	if !reflect.DeepEqual(dry.Unset, wantUnset) {
		t.Errorf("unset:\n got %+v\nwant %+v", dry.Unset, wantUnset)
	}
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, dry, litellm.Options{DryRun: true})
		if o, p, r := h.counts(t); o+p+r != 0 {
			t.Errorf("dry run wrote %d orgs, %d providers, %d routes", o, p, r)
		}
		wantLines(t, out,
			litellm.UnsetHeader+"\nPROXY_TEST_ANTHROPIC_KEY: model_list[8].litellm_params.api_key, model_list[12].litellm_params.api_key\n"+
				"PROXY_TEST_OPENAI_KEY: model_list[0].litellm_params.api_key, model_list[7].litellm_params.api_key\n"+
				"PROXY_TEST_VLLM_KEY: model_list[2].litellm_params.api_key, model_list[3].litellm_params.api_key\n",
			"would create provider openai-api-openai-com-v1: kind openai, base_url https://api.openai.com/v1, 1 key from os.environ/PROXY_TEST_OPENAI_KEY (not set)\n",
			"would create provider openai-llm-example-com-v1: kind openai, base_url https://llm.example.com/v1, 1 key\n", // environment_variables
			"would create group openai for openai/*: openai-api-openai-com-v1 weight 1 (clients ask for openai/<model>)\n",
		)
		if !strings.HasSuffix(out, "dry run: would create 8 providers, 6 routes, 2 groups; would skip 0 providers, 0 routes (already present); 3 entries not imported; nothing written\n") {
			t.Errorf("summary:\n%s", out)
		}

		// A real import must have the variables.
		var buf bytes.Buffer
		if err := litellm.Run(context.Background(), h.db, h.svc, dry, litellm.Options{}, &buf); err == nil ||
			!strings.Contains(err.Error(), "environment variables not set: PROXY_TEST_ANTHROPIC_KEY, PROXY_TEST_OPENAI_KEY, PROXY_TEST_VLLM_KEY; nothing written") {
			t.Errorf("a real run of a dry-run config: %v", err)
		}
		if o, p, r := h.counts(t); o+p+r != 0 {
			t.Errorf("refused run wrote %d orgs, %d providers, %d routes", o, p, r)
		}

		h.run(t, parseProxy(t, proxyVars()), litellm.Options{})
		again := h.run(t, dry, litellm.Options{DryRun: true})
		wantLines(t, again,
			"provider vllm-10-0-0-5-8000-v1 exists (imported before): unchanged\n",
			"provider vllm-10-0-0-5-8000-v1 keeps its keys (api_key comes from os.environ/PROXY_TEST_VLLM_KEY, which is not set, so the dry run cannot tell whether it changed)\n",
		)
		if !strings.HasSuffix(again, "dry run: would create 0 providers, 0 routes; would skip 8 providers, 6 routes, 2 groups (already present); 3 entries not imported; nothing written\n") {
			t.Errorf("dry run after the import:\n%s", again)
		}
	})
}

// TestProxyReRunAfterEdits: an operator edits an imported provider's
// base_url, adds a key by hand and changes the imported key's weight, and
// the upstream keys rotate. A re-run creates no provider: it replaces the
// imported keys (keeping their weight), leaves the hand-added key and the
// edited base_url, and a later change of api_base in the file moves the
// provider and renames it, its slug unchanged.
func TestProxyReRunAfterEdits(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.run(t, parseProxy(t, proxyVars()), litellm.Options{})
		edited := "http://10.0.0.50:8000/v1"
		if _, err := h.svc.UpdateProvider(ctx, "default", "vllm-10-0-0-5-8000-v1", admin.ProviderPatch{BaseURL: &edited}, false); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.AddProviderKey(ctx, "default", "openai-api-openai-com-v1", admin.KeyInput{Secret: secret.New(proxyManualKey)}); err != nil {
			t.Fatal(err)
		}
		oai := mustProvider(t, h, "default", "openai-api-openai-com-v1")
		w := 3
		if _, err := h.svc.SetProviderKeyWeight(ctx, "default", oai.Slug, itoa(oai.Keys[0].ID), admin.KeyWeightInput{Weight: &w}); err != nil {
			t.Fatal(err)
		}
		oldVLLM := mustProvider(t, h, "default", "vllm-10-0-0-5-8000-v1").Keys[0].ID

		vars := proxyVars()
		vars["PROXY_TEST_VLLM_KEY"] = proxyRotatedKey
		vars["PROXY_TEST_OPENAI_KEY"] = proxyRotatedOAI
		out := h.run(t, parseProxy(t, vars), litellm.Options{})
		wantLines(t, out,
			"updated provider vllm-10-0-0-5-8000-v1: key "+itoa(oldVLLM)+" replaced by the new value of os.environ/PROXY_TEST_VLLM_KEY\n",
			"provider vllm-10-0-0-5-8000-v1 keeps base_url http://10.0.0.50:8000/v1 (edited since the import; the file still says http://10.0.0.5:8000/v1)\n",
			"updated provider openai-api-openai-com-v1: key "+itoa(oai.Keys[0].ID)+" replaced by the new value of os.environ/PROXY_TEST_OPENAI_KEY\n",
		)
		if !strings.HasSuffix(out, "created 0 providers, 0 routes; updated 3 providers; skipped 5 providers, 6 routes, 2 groups (already present); 3 entries not imported\n") {
			t.Errorf("summary:\n%s", out)
		}
		want := slices.Clone(proxyProviders)
		want[0].Key = proxyManualKey + "+" + proxyRotatedOAI
		want[1].BaseURL, want[1].Key = edited, proxyRotatedKey
		want[2].Key = proxyRotatedKey
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, want) {
			t.Errorf("providers:\n got %+v\nwant %+v", got, want)
		}
		oai = mustProvider(t, h, "default", "openai-api-openai-com-v1")
		if len(oai.Keys) != 2 || oai.Keys[1].Weight != 3 || oai.Keys[0].Weight != 1 || oai.Keys[1].Ref != "PROXY_TEST_OPENAI_KEY" || oai.Keys[0].Ref != "" {
			t.Errorf("openai keys: %+v (the replacement keeps the weight 3 of the key it replaces, and records its variable)", oai.Keys)
		}

		// The file moves the second vLLM box: the provider follows, renamed.
		moved := strings.Replace(string(readProxy(t)), "http://10.0.0.6:8000/v1", "http://10.0.0.16:8000/v1", 1)
		cfg, err := litellm.Parse([]byte(moved), env(vars))
		if err != nil {
			t.Fatal(err)
		}
		out = h.run(t, cfg, litellm.Options{})
		wantLines(t, out, `updated provider vllm-10-0-0-6-8000-v1: base_url http://10.0.0.6:8000/v1 -> http://10.0.0.16:8000/v1; name "vllm 10.0.0.6:8000/v1" -> "vllm 10.0.0.16:8000/v1"`+"\n")
		want[2].Name, want[2].BaseURL = "vllm 10.0.0.16:8000/v1", "http://10.0.0.16:8000/v1"
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, want) {
			t.Errorf("providers after the move:\n got %+v\nwant %+v", got, want)
		}
		if again := h.run(t, cfg, litellm.Options{}); strings.Contains(again, "updated provider") || strings.Contains(again, "created provider") {
			t.Errorf("a third run changed something:\n%s", again)
		}
	})
}

// TestImportIdentity: an entry's identity survives edits of api_base and
// api_key and the insertion of other entries, and differs by project.
func TestImportIdentity(t *testing.T) {
	parse := func(y string) []litellm.Entry {
		t.Helper()
		cfg, err := litellm.Parse([]byte("model_list:\n"+y), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Entries
	}
	a := parse("- {model_name: m, litellm_params: {model: openai/x, api_key: k1}}\n- {model_name: m, litellm_params: {model: openai/x, api_key: k2}}\n")
	b := parse("- {model_name: other, litellm_params: {model: openai/o}}\n" +
		"- {model_name: m, litellm_params: {model: openai/x, api_key: k9, api_base: 'http://h:1/v1'}}\n- {model_name: m, litellm_params: {model: openai/x, api_key: k2}}\n")
	if litellm.EntryID("p", a[0]) != litellm.EntryID("p", b[1]) || litellm.EntryID("p", a[1]) != litellm.EntryID("p", b[2]) {
		t.Error("an edit of api_base or api_key, or an inserted entry, changed an identity")
	}
	if litellm.EntryID("p", a[0]) == litellm.EntryID("p", a[1]) {
		t.Error("two entries with the same model_name and model share an identity")
	}
	if litellm.EntryID("p", a[0]) == litellm.EntryID("q", a[0]) {
		t.Error("the identity does not depend on the project")
	}
	if e := parse("- {model_name: m, litellm_params: {model: openai/y, api_key: k1}}\n"); litellm.EntryID("p", e[0]) == litellm.EntryID("p", a[0]) {
		t.Error("another model string kept the identity; only model_info.id does")
	}
	c := parse("- {model_name: m, litellm_params: {model: openai/x}, model_info: {id: dep-1}}\n")
	d := parse("- {model_name: renamed, litellm_params: {model: openai/y}, model_info: {id: dep-1}}\n")
	if litellm.EntryID("p", c[0]) != litellm.EntryID("p", d[0]) {
		t.Error("model_info.id does not make the identity")
	}
	if id := litellm.EntryID("p", a[0]); !strings.HasPrefix(id, "litellm:") || len(id) != len("litellm:")+32 {
		t.Errorf("identity %q", id)
	}
}

// TestParseForgiving: what each kind of entry becomes.
func TestParseForgiving(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		// want: Kind BaseURL Upstream Wildcard of the one imported entry,
		// or skip: the reason's substring.
		want []string
		skip string
	}{
		{"ollama with api_base", "{model_name: a, litellm_params: {model: ollama/llama3, api_base: 'http://o:11434'}}",
			[]string{"openai", "http://o:11434/v1", "llama3", ""}, ""},
		{"ollama with /v1", "{model_name: a, litellm_params: {model: ollama/llama3, api_base: 'http://o:11434/v1/'}}",
			[]string{"openai", "http://o:11434/v1", "llama3", ""}, ""},
		{"ollama default", "{model_name: a, litellm_params: {model: ollama_chat/llama3}}",
			[]string{"openai", "http://localhost:11434/v1", "llama3", ""}, ""},
		{"lm studio default", "{model_name: a, litellm_params: {model: lm_studio/q}}",
			[]string{"openai", "http://localhost:1234/v1", "q", ""}, ""},
		{"custom_llm_provider", "{model_name: a, litellm_params: {model: Qwen/Qwen3-8B, custom_llm_provider: hosted_vllm, api_base: 'http://v/v1'}}",
			[]string{"vllm", "http://v/v1", "Qwen/Qwen3-8B", ""}, ""},
		{"prefix wildcard", "{model_name: 'groq/*', litellm_params: {model: 'openai/*', api_base: 'https://g/openai/v1'}}",
			[]string{"openai", "https://g/openai/v1", "", "groq"}, ""},
		{"catch-all", "{model_name: '*', litellm_params: {model: 'hosted_vllm/*', api_base: 'http://v/v1'}}",
			[]string{"vllm", "http://v/v1", "", "*"}, ""},
		{"unknown prefix", "{model_name: a, litellm_params: {model: Qwen/Qwen3-8B}}", nil, "Qwen/ is not a LiteLLM provider prefix"},
		{"azure", "{model_name: a, litellm_params: {model: azure/x, api_version: v}}", nil, "LiteLLM provider azure/ has no rolter equivalent"},
		{"azure with a broken model_name", "{model_name: 'a b', litellm_params: {model: azure/x}}", nil, "azure/"},
		{"provider-less star", "{model_name: '*', litellm_params: {model: '*'}}", nil, `litellm_params.model "*" lets LiteLLM pick the provider`},
		{"wildcard to one model", "{model_name: 'openai/*', litellm_params: {model: openai/gpt-4o}}", nil, "is a wildcard sent to one model"},
		{"partial wildcard", "{model_name: 'gpt-*', litellm_params: {model: 'openai/gpt-*'}}", nil, "are a LiteLLM pattern route"},
		{"star in the middle", "{model_name: 'a/*/b', litellm_params: {model: 'openai/*'}}", nil, "is a LiteLLM pattern"},
		{"model wildcard only", "{model_name: a, litellm_params: {model: 'openai/*'}}", nil, "is a wildcard but model_name is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := litellm.Parse([]byte("model_list:\n- "+tc.yaml+"\n"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.skip != "" {
				if len(cfg.Entries) != 0 || len(cfg.Skipped) != 1 || !strings.Contains(cfg.Skipped[0].Reason, tc.skip) {
					t.Errorf("entries %+v, skipped %+v; want skipped with %q", cfg.Entries, cfg.Skipped, tc.skip)
				}
				return
			}
			if len(cfg.Entries) != 1 || len(cfg.Skipped) != 0 {
				t.Fatalf("entries %+v, skipped %+v", cfg.Entries, cfg.Skipped)
			}
			e := cfg.Entries[0]
			if got := []string{e.Kind, e.BaseURL, e.UpstreamModel, e.Wildcard}; !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseLimits: rpm and tpm become route limits only where every
// deployment of the route sets them.
func TestParseLimits(t *testing.T) {
	y := `model_list:
- {model_name: a, litellm_params: {model: openai/a, rpm: 10, tpm: 1000}}
- {model_name: a, litellm_params: {model: openai/a, api_key: k, rpm: 5}}
- {model_name: b, litellm_params: {model: openai/b, tpm: 7}}
- {model_name: 'x/*', litellm_params: {model: 'openai/*', rpm: 3}}
`
	cfg, err := litellm.Parse([]byte(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]litellm.Limits{"a": {RPM: 15}, "b": {TPM: 7}}
	if !maps.Equal(cfg.Limits, want) {
		t.Errorf("limits %v, want %v", cfg.Limits, want)
	}
	wantWarn := []string{
		"ignored litellm_params.rpm in model_list[3] (a wildcard becomes a group or a provider address, and rolter limits routes, keys and projects)",
		"ignored litellm_params.tpm in model_list[0] (route a: model_list[1] sets no tpm, so the deployments have no total to carry over; set tpm_limit on the route or on keys)",
	}
	if !reflect.DeepEqual(cfg.Warnings, wantWarn) {
		t.Errorf("warnings:\n got %q\nwant %q", cfg.Warnings, wantWarn)
	}
}

// TestParseEnvironmentVariables: the file's environment_variables block
// answers os.environ/ references before the process environment, as in
// LiteLLM, and is not reported as ignored.
func TestParseEnvironmentVariables(t *testing.T) {
	y := "model_list:\n- {model_name: a, litellm_params: {model: openai/a, api_key: os.environ/K}}\nenvironment_variables: {K: " + secondKey + "}\n"
	cfg, err := litellm.Parse([]byte(y), env(map[string]string{"K": openAIKey}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Entries[0].Key.Reveal(); got != secondKey {
		t.Errorf("key from %q, want the file's", got)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

// TestProbe: with Probe, an openai-kind provider whose server answers
// GET /props as llama.cpp does gets a suggestion, sent with its key; one
// that does not answer so gets none, and without Probe no request is made
// (a dry run included).
func TestProbe(t *testing.T) {
	var hits atomic.Int32
	llama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/props" || r.Header.Get("Authorization") != "Bearer "+secondKey {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"default_generation_settings":{"n_ctx":8192},"total_slots":4}`)
	}))
	defer llama.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`) // 200, but not llama.cpp's answer
	}))
	defer plain.Close()
	y := "model_list:\n" +
		"- {model_name: a, litellm_params: {model: openai/a, api_base: '" + llama.URL + "/v1', api_key: " + secondKey + "}}\n" +
		"- {model_name: b, litellm_params: {model: openai/b, api_base: '" + plain.URL + "/v1'}}\n" +
		"- {model_name: c, litellm_params: {model: hosted_vllm/c, api_base: '" + llama.URL + "/v1'}}\n" // not openai: not probed
	cfg, err := litellm.Parse([]byte(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "sqlite", "")
	if out := h.run(t, cfg, litellm.Options{DryRun: true}); strings.Contains(out, "suggestion") || hits.Load() != 0 {
		t.Fatalf("probed without Probe: %d requests\n%s", hits.Load(), out)
	}
	out := h.run(t, cfg, litellm.Options{DryRun: true, Probe: true})
	slug := admin.BaseSlug(litellm.ProviderName("openai", llama.URL+"/v1"))
	want := "suggestion: provider " + slug + " (model_list[0]) answers GET /props as a llama.cpp server does: with kind llamacpp rolter also reads its health and context (rolter providers update " + slug + " --kind llamacpp)\n"
	if !strings.Contains(out, want) || strings.Count(out, "suggestion:") != 1 {
		t.Errorf("output lacks %q alone:\n%s", want, out)
	}
	if hits.Load() != 2 {
		t.Errorf("%d probe requests, want 2 (the openai-kind providers)", hits.Load())
	}
}

// TestReRunKindAndKey: an operator's kind edit is kept while the file
// says the same; the file's own changes of api_key and kind are written,
// and the name follows the kind unless it was renamed. The entry carries
// model_info.id, which keeps its identity when its model string changes.
func TestReRunKindAndKey(t *testing.T) {
	entry := func(model, key string) *litellm.Config {
		t.Helper()
		y := "model_list:\n- {model_name: m, model_info: {id: dep-1}, litellm_params: {model: " + model + ", api_base: 'http://h:1/v1'" + key + "}}\n"
		cfg, err := litellm.Parse([]byte(y), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.run(t, entry("openai/x", ", api_key: "+secondKey), litellm.Options{})
		llama := "llamacpp"
		if _, err := h.svc.UpdateProvider(ctx, "default", "openai-h-1-v1", admin.ProviderPatch{Kind: &llama}, false); err != nil {
			t.Fatal(err)
		}
		out := h.run(t, entry("openai/x", ", api_key: "+secondKey), litellm.Options{})
		wantLines(t, out, "provider openai-h-1-v1 exists (imported before): unchanged\n",
			"provider openai-h-1-v1 keeps kind llamacpp (edited since the import; the file still says openai)\n")

		keyID := mustProvider(t, h, "default", "openai-h-1-v1").Keys[0].ID
		out = h.run(t, entry("openai/x", ""), litellm.Options{})
		wantLines(t, out, "updated provider openai-h-1-v1: key "+itoa(keyID)+" removed (the entry has no api_key now)\n")
		if p := mustProvider(t, h, "default", "openai-h-1-v1"); len(p.Keys) != 0 || p.Kind != "llamacpp" {
			t.Errorf("provider after the key left the file: kind %s, %d keys", p.Kind, len(p.Keys))
		}

		out = h.run(t, entry("hosted_vllm/x", ", api_key: "+openAIKey), litellm.Options{})
		wantLines(t, out, `updated provider openai-h-1-v1: kind llamacpp -> vllm; name "openai h:1/v1" -> "vllm h:1/v1"; key added from the file's api_key`+"\n")
		if p := mustProvider(t, h, "default", "openai-h-1-v1"); len(p.Keys) != 1 || p.Keys[0].Ref != "" {
			t.Errorf("a literal key recorded a ref: %+v", p.Keys)
		}
		want := []provRow{{"openai-h-1-v1", "vllm h:1/v1", "vllm", "http://h:1/v1", openAIKey}}
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, want) {
			t.Errorf("providers:\n got %+v\nwant %+v", got, want)
		}
		if again := h.run(t, entry("hosted_vllm/x", ", api_key: "+openAIKey), litellm.Options{}); !strings.Contains(again, "exists (imported before): unchanged\n") || strings.Contains(again, "keeps") {
			t.Errorf("a run with nothing new:\n%s", again)
		}
	})
}

// TestReRunKeepsProviderSettings: an update of an imported provider goes
// through admin.Service.Apply as the whole entry, so the settings an
// operator gave it that no LiteLLM entry names (context limit, models,
// timeouts, forwarded headers, policy) and the org's description must
// come through a key rotation and a move unchanged.
func TestReRunKeepsProviderSettings(t *testing.T) {
	entry := func(base, key string) *litellm.Config {
		t.Helper()
		y := "model_list:\n- {model_name: m, model_info: {id: dep-1}, litellm_params: {model: openai/x, api_base: '" + base + "', api_key: " + key + "}}\n"
		cfg, err := litellm.Parse([]byte(y), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.run(t, entry("http://h:1/v1", secondKey), litellm.Options{})
		limit, models, headers := 32768, []string{"x", "y"}, []string{"x-team"}
		fbt := store.Duration(7 * time.Second)
		policy := store.Policy{MaxConcurrency: 4}
		desc := "edited by an operator"
		if _, err := h.svc.UpdateProvider(ctx, "default", "openai-h-1-v1", admin.ProviderPatch{ContextLimit: &limit, Models: &models,
			FirstByteTimeout: &fbt, ForwardHeaders: &headers, Policy: &policy}, false); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.PatchOrg(ctx, "default", admin.OrgPatch{Description: &desc}); err != nil {
			t.Fatal(err)
		}
		before, err := h.svc.GetProvider(ctx, "default", "openai-h-1-v1")
		if err != nil {
			t.Fatal(err)
		}

		out := h.run(t, entry("http://h:2/v1", openAIKey), litellm.Options{})
		wantLines(t, out, "updated provider openai-h-1-v1: base_url http://h:1/v1 -> http://h:2/v1")
		got, err := h.svc.GetProvider(ctx, "default", "openai-h-1-v1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ContextLimit != limit || !slices.Equal(got.Models, models) || got.FirstByteTimeout != fbt ||
			!slices.Equal(got.ForwardHeaders, before.ForwardHeaders) || len(got.ForwardHeaders) != 1 || got.Policy != before.Policy || got.MetadataSource != before.MetadataSource {
			t.Errorf("the update lost an operator's settings:\nbefore %+v\n after %+v", before, got)
		}
		if len(got.Keys) != 1 || got.Keys[0].ID == before.Keys[0].ID {
			t.Errorf("keys after the rotation: %+v (before %+v)", got.Keys, before.Keys)
		}
		if o, err := h.svc.GetOrg(ctx, "default"); err != nil || o.Description != desc {
			t.Errorf("org description %q, %v; want %q", o.Description, err, desc)
		}
		// The record names the new key: a third run changes nothing.
		if again := h.run(t, entry("http://h:2/v1", openAIKey), litellm.Options{}); !strings.Contains(again, "exists (imported before): unchanged\n") {
			t.Errorf("a run with nothing new:\n%s", again)
		}
	})
}
