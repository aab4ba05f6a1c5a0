package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

// An hf source's token reaches vLLM as HF_TOKEN in its environment only:
// not on its command line, not in the agent's log, not for an assignment
// without one.
func TestAgentPassesHFToken(t *testing.T) {
	const token = "hf_agent-test-token-0123456789"
	e := newEnv(t)
	t.Setenv("HF_TOKEN", "") // the box's own, empty here
	fs := newFleetServer(t)
	withToken, without := freePort(t), freePort(t)
	a := hfAssignment(7, withToken)
	a.HFToken = token
	fs.set(a, hfAssignment(8, without))
	r := e.start(e.config(fs.url()))

	rec := e.waitRun(withToken)
	if v, ok := envValue(rec.Env, "HF_TOKEN"); !ok || v != token {
		t.Errorf("vLLM of host 7: HF_TOKEN set=%v, matches=%v", ok, v == token)
	}
	testkit.AssertNoSecrets(t, "vLLM's argv", strings.Join(rec.Argv, " "), token)
	rec8 := e.waitRun(without)
	if v, _ := envValue(rec8.Env, "HF_TOKEN"); v != "" {
		t.Error("vLLM of host 8, which has no token, got one")
	}
	testkit.Eventually(t, "the fake vLLMs logged whether HF_TOKEN is set", func() bool {
		b7, _ := os.ReadFile(filepath.Join(e.state, "vllm-7.log"))
		b8, _ := os.ReadFile(filepath.Join(e.state, "vllm-8.log"))
		return strings.Contains(string(b7), "HF_TOKEN is set") && strings.Contains(string(b8), "HF_TOKEN is not set")
	})
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	testkit.AssertNoSecrets(t, "the agent's log", e.logs.String(), token)
	for _, f := range []string{"vllm-7.log", "vllm-8.log"} {
		b, _ := os.ReadFile(filepath.Join(e.state, f))
		testkit.AssertNoSecrets(t, f, string(b), token)
	}
}
