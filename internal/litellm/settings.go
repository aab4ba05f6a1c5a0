package litellm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// settingWarnings names every top-level setting the import does not carry
// over, one line each: each key of a settings block
// ("litellm_settings.drop_params"), or a top-level key that is no block.
// model_list and environment_variables are read, so never named here.
// Values are never quoted: they hold master keys and database URLs.
func settingWarnings(top map[string]any) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(top)) {
		block, ok := top[k].(map[string]any)
		if !ok || len(block) == 0 {
			out = append(out, fmt.Sprintf("ignored top-level key %s: no rolter equivalent", k))
			continue
		}
		for _, sub := range slices.Sorted(maps.Keys(block)) {
			out = append(out, "ignored "+k+"."+sub+": "+settingReason(sub, block[sub]))
		}
	}
	return out
}

// settingReasons explain the settings users most often ask about, by key
// name in any block.
var settingReasons = map[string]string{ //nolint:gosec // G101: explanations keyed by setting names, no credential
	"master_key":       "rolter has no master key: admin tokens guard the admin API (ROLTER_ADMIN_TOKEN, /admin/v1/tokens) and clients use virtual keys",
	"database_url":     "rolter keeps its state in its own store (--store)",
	"routing_strategy": "each rolter route balances its targets by its own strategy (weighted, round_robin, least_busy or latency)",
	"num_retries":      "rolter retries a failed request on the route's other targets itself (docs/data-path.md)",
	"redis_host":       "rolter shares rate-limit counters between replicas through --redis",
	"redis_port":       "rolter shares rate-limit counters between replicas through --redis",
	"redis_password":   "rolter shares rate-limit counters between replicas through --redis",
}

// settingReason says why a setting is not carried over.
func settingReason(key string, v any) string {
	if strings.HasSuffix(key, "fallbacks") {
		r := "rolter maps fallbacks and context_window_fallbacks (lists of {model_name: [model_name, ...]}) onto routes; not this one"
		if pairs := fallbackPairs(v); pairs != "" {
			r += ": " + pairs
		}
		return r
	}
	if r, ok := settingReasons[key]; ok {
		return r
	}
	return "no rolter equivalent"
}

// maxFallbackPairs bounds how many fallbacks a warning spells out.
const maxFallbackPairs = 8

// fallbackPairs spells out LiteLLM fallbacks ([{model: [fallback, ...]}])
// as "gpt-4o -> gpt-4o-mini, claude-sonnet"; "" when v has another shape.
// They are model names, which the report prints anyway.
func fallbackPairs(v any) string {
	list, ok := v.([]any)
	if !ok {
		return ""
	}
	var pairs []string
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return ""
		}
		for _, from := range slices.Sorted(maps.Keys(m)) {
			tos, ok := m[from].([]any)
			if !ok {
				return ""
			}
			names := make([]string, 0, len(tos))
			for _, to := range tos {
				s, ok := to.(string)
				if !ok {
					return ""
				}
				names = append(names, s)
			}
			pairs = append(pairs, from+" -> "+strings.Join(names, ", "))
		}
	}
	if len(pairs) > maxFallbackPairs {
		pairs = append(pairs[:maxFallbackPairs], fmt.Sprintf("and %d more", len(pairs)-maxFallbackPairs))
	}
	return strings.Join(pairs, "; ")
}

// entryReasons explain the entry keys users most often ask about.
var entryReasons = map[string]string{ //nolint:gosec // G101: explanations keyed by setting names, no credential
	"litellm_params.timeout":               "set first_byte_timeout and idle_timeout on the provider",
	"litellm_params.stream_timeout":        "set first_byte_timeout and idle_timeout on the provider",
	"litellm_params.max_parallel_requests": "a provider's policy max_concurrency bounds its concurrent requests",
	"litellm_params.input_cost_per_token":  "set prices on the provider (per million tokens)",
	"litellm_params.output_cost_per_token": "set prices on the provider (per million tokens)",
	"model_info.input_cost_per_token":      "set prices on the provider (per million tokens)",
	"model_info.output_cost_per_token":     "set prices on the provider (per million tokens)",
}

// because is the reason appended to the warning about an entry key.
func because(key string) string {
	if r, ok := entryReasons[key]; ok {
		return " (" + r + ")"
	}
	return ""
}
