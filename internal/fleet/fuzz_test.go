package fleet

import (
	"encoding/json"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// FuzzRecipe: any JSON recipe is validated without panicking; a valid one
// agrees with itself on the contract and keeps its revision across a JSON
// round trip (what the store does to it).
func FuzzRecipe(f *testing.F) {
	for _, s := range []string{
		`{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18,"args":["--max-model-len","32768"]}}`,
		`{"vllm":{"model":"m","source":{"kind":"url","url":"https://x/y"},"vram_gb":1,"disk_gb":1,"args":["--served-model-name=a","--enable-auto-tool-choice","--tool-call-parser","hermes"]}}`,
		`{"vllm":{"model":"m","source":{"kind":"local","path":"/m"},"vram_gb":1e3,"disk_gb":0.5,"args":["--max-model-len"]}}`,
		`{"vllm":null}`, `{}`, `{"vllm":{"args":["--port","1","--api-key=x"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r fleetapi.Recipe
		if json.Unmarshal(b, &r) != nil {
			return
		}
		fe := ValidateRecipe(r)
		if fe != nil {
			return
		}
		if name, _, _, differ := ContractDiff(r.VLLM, r.VLLM); differ {
			t.Fatalf("a recipe differs from itself on %s", name)
		}
		if r.VLLM.ServedName() == "" {
			t.Fatal("a valid recipe serves no model name")
		}
		h := &store.Host{ID: 1, ModelName: "m", Port: 8000, APIKey: secret.New("rh-a_b"), Recipe: r}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back fleetapi.Recipe
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatal(err)
		}
		h2 := *h
		h2.Recipe = back
		if Revision(h) != Revision(&h2) {
			t.Fatalf("revision changed across a JSON round trip: %s", enc)
		}
	})
}
