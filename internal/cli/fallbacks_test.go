package cli

import (
	"reflect"
	"regexp"
	"testing"
)

// Issue 19: --target's @PRIORITY, --fallback and --context-fallback write
// the new route fields, the list shows them, ” clears them, and the
// admin API's refusal of a cycle is a usage error.
func TestRouteFallbackFlags(t *testing.T) {
	newOrg(t, "t-fallbacks")
	org := []string{"--org", "t-fallbacks"}
	for _, p := range []string{"vllm", "cloud"} {
		must(t, append([]string{"providers", "create", "--name", p, "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1"}, org...)...)
	}
	must(t, append([]string{"routes", "create", "--model", "big", "--target", "cloud:gpt-4o"}, org...)...)
	must(t, append([]string{"routes", "create", "--model", "spare", "--target", "cloud"}, org...)...)
	must(t, append([]string{"routes", "create", "--model", "qwen3", "--target", "vllm:Qwen/Qwen3-8B:2",
		"--target", "cloud:gpt-4o-mini@1", "--fallback", "spare", "--fallback", "big", "--context-fallback", "big"}, org...)...)
	r := jsonObject(t, append([]string{"routes", "get", "qwen3"}, org...)...)
	tgs := r["targets"].([]any)
	if !reflect.DeepEqual(r["fallbacks"], []any{"spare", "big"}) || r["context_fallback"] != "big" ||
		tgs[0].(map[string]any)["priority"] != float64(0) || tgs[0].(map[string]any)["weight"] != float64(2) ||
		tgs[1].(map[string]any)["priority"] != float64(1) || tgs[1].(map[string]any)["upstream_model"] != "gpt-4o-mini" {
		t.Fatalf("routes get: %v", r)
	}
	list := must(t, append([]string{"routes", "list"}, org...)...)
	if !regexp.MustCompile(`(?m)^qwen3\s+weighted\s+vllm:Qwen/Qwen3-8B\*2,cloud:gpt-4o-mini@1\s+-\s+-\s+spare,big,ctx:big\s*$`).MatchString(list) {
		t.Errorf("routes list:\n%s", list)
	}
	wantExit(t, ExitUsage, append([]string{"routes", "update", "big", "--fallback", "qwen3"}, org...)...) // fallback_cycle
	wantExit(t, ExitConflict, append([]string{"routes", "delete", "spare"}, org...)...)                   // route_is_fallback
	must(t, append([]string{"routes", "update", "qwen3", "--fallback", "", "--context-fallback", ""}, org...)...)
	r = jsonObject(t, append([]string{"routes", "get", "qwen3"}, org...)...)
	if !reflect.DeepEqual(r["fallbacks"], []any{}) || r["context_fallback"] != nil {
		t.Fatalf("after clearing: %v", r)
	}
	must(t, append([]string{"routes", "delete", "spare"}, org...)...)
}
