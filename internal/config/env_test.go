package config_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/config"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// A key's secret is a reference in three spellings; each is resolved from
// the lookup, recorded as the key's ref, and, with AllowUnset, an unset
// one is listed rather than refused.
func TestParseEnvReferences(t *testing.T) {
	const doc = `orgs:
  - name: acme
    providers:
      - name: openai
        kind: openai
        base_url: https://api.openai.com/v1
        keys:
          - secret: os.environ/KEY_A
          - secret: ${KEY_B}
          - secret_env: KEY_C
          - secret: sk-literal-FAKE
`
	env := map[string]string{"KEY_A": "sk-FAKE-a", "KEY_B": "sk-FAKE-b", "KEY_C": "sk-FAKE-c"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f, unset, err := config.ParseWith([]byte(doc), config.ParseOptions{Lookup: lookup})
	if err != nil || len(unset) != 0 {
		t.Fatalf("ParseWith: %v, unset %v", err, unset)
	}
	keys := f.Desired().Orgs[0].Providers[0].Keys
	want := []struct{ ref, secret string }{{"KEY_A", "sk-FAKE-a"}, {"KEY_B", "sk-FAKE-b"}, {"KEY_C", "sk-FAKE-c"}, {"", "sk-literal-FAKE"}}
	if len(keys) != len(want) {
		t.Fatalf("%d keys", len(keys))
	}
	for i, w := range want {
		if keys[i].Ref != w.ref || keys[i].Secret.Reveal() != w.secret {
			t.Errorf("keys[%d]: ref %q, secret as expected %v; want ref %q", i, keys[i].Ref, keys[i].Secret.Reveal() == w.secret, w.ref)
		}
	}

	delete(env, "KEY_B")
	env["KEY_C"] = "" // set but empty is unset
	f, unset, err = config.ParseWith([]byte(doc), config.ParseOptions{Lookup: lookup, AllowUnset: true})
	if err != nil {
		t.Fatal(err)
	}
	wantUnset := []config.Unset{{Entry: "orgs[0].providers[0].keys[1]", Name: "KEY_B"}, {Entry: "orgs[0].providers[0].keys[2]", Name: "KEY_C"}}
	if !reflect.DeepEqual(unset, wantUnset) {
		t.Fatalf("unset = %v, want %v", unset, wantUnset)
	}
	if k := f.Desired().Orgs[0].Providers[0].Keys[1]; !k.Secret.IsZero() || k.Ref != "KEY_B" {
		t.Fatalf("an unset key: ref %q, has a secret %v", k.Ref, !k.Secret.IsZero())
	}
	if _, _, err := config.ParseWith([]byte(doc), config.ParseOptions{Lookup: lookup}); err == nil ||
		err.Error() != "orgs[0].providers[0].keys[1]: environment variable KEY_B (secret_env) is not set" {
		t.Fatalf("without AllowUnset: %v", err)
	}
}

// An export written as a file reads back as the same desired state, with
// every pool key a reference (a placeholder where none was recorded) and
// no secret in the text.
func TestExportFileRoundTrip(t *testing.T) {
	exp := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	d := admin.Desired{Orgs: []admin.DesiredOrg{{
		OrgInput: admin.OrgInput{Name: "acme", Description: "Acme"},
		Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Name: "OpenAI", Slug: "open-ai", Kind: "openai",
			BaseURL: "https://api.openai.com/v1", MetadataSource: "configured", Models: []string{"gpt-4o"},
			FirstByteTimeout: store.Duration(30 * time.Second), ForwardHeaders: []string{"X-Trace-*"},
			Policy: store.Policy{MaxConcurrency: 4}, Prices: &admin.PricesInput{Input: "0.15", Output: "0.6"},
			Keys: []admin.KeyInput{{Ref: "OPENAI_KEY", Weight: intp(2)}, {Weight: intp(1)}}}}},
		Groups: []admin.DesiredGroup{{GroupInput: admin.GroupInput{Slug: "g", Name: "G", Strategy: "weighted",
			Members: []admin.GroupMemberInput{{Provider: "open-ai", Weight: intp(1), ModelMap: map[string]string{"a": "b"}}}}}},
		Projects: []admin.DesiredProject{{
			ProjectInput: admin.ProjectInput{Name: "web", Budget: &admin.BudgetInput{Amount: "25", Period: "month"}, RPMLimit: 60},
			Routes: []admin.RouteInput{{Model: "team/gpt", Strategy: "weighted", Policy: store.Policy{Tools: "deny"},
				Targets: []admin.TargetInput{{Provider: "open-ai", UpstreamModel: "gpt-4o", Weight: intp(0)}}}},
			Keys: []admin.VirtualKeyInput{{Name: "fe", Models: []string{"team/gpt"}, ExpiresAt: &exp, Budget: &admin.BudgetInput{Amount: "5", Period: "day"}}},
		}},
		Hosts: []admin.HostInput{{IP: "10.0.1.1", Port: 8000, Project: "web", ModelName: "qwen3", Notes: "rack 4", AutoApply: true,
			DrainTimeout: durp(45 * time.Second), Recipe: fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf", Revision: "main"},
				VRAMGB: 16, DiskGB: 18, Args: []string{"--max-model-len", "8192"}}}}},
	}}}
	f, placeholders := config.FromDesired(d)
	if !reflect.DeepEqual(placeholders, []string{"ACME_OPEN_AI_KEY_2"}) {
		t.Fatalf("placeholders = %v", placeholders)
	}
	text, err := config.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_KEY": "sk-FAKE-1", "ACME_OPEN_AI_KEY_2": "sk-FAKE-2"}
	back, _, err := config.ParseWith(text, config.ParseOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, text)
	}
	got := back.Desired()
	want := d
	want.Orgs[0].Providers[0].Keys = []admin.KeyInput{{Ref: "OPENAI_KEY", Weight: intp(2), Secret: secret.New("sk-FAKE-1")},
		{Ref: "ACME_OPEN_AI_KEY_2", Weight: intp(1), Secret: secret.New("sk-FAKE-2")}}
	gotJSON, wantJSON := revealKeys(got), revealKeys(want)
	if !reflect.DeepEqual(gotJSON, wantJSON) {
		t.Fatalf("round trip:\n got %+v\nwant %+v\nfile:\n%s", gotJSON, wantJSON, text)
	}
	assertNoSecrets(t, "the export", string(text))
}

// revealKeys compares desired states with their key secrets in the clear
// (a Secret compares by value, but prints redacted).
func revealKeys(d admin.Desired) []any {
	out := []any{d}
	for _, o := range d.Orgs {
		for _, p := range o.Providers {
			for _, k := range p.Keys {
				out = append(out, k.Secret.Reveal())
			}
		}
	}
	return out
}

func durp(d time.Duration) *store.Duration { v := store.Duration(d); return &v }

// A host's hf_token is read from the environment like a pool key, never
// kept as the reference text, and an unset one is named.
func TestHostHFTokenFromEnvironment(t *testing.T) {
	doc := []byte(`orgs:
  - name: acme
    hosts:
      - ip: 10.0.1.1
        port: 8000
        model_name: qwen3
        hf_token: os.environ/HF_T
        recipe: {vllm: {model: Qwen/Qwen3-8B, source: {kind: hf}}}
`)
	lookup := func(env map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}
	f, _, err := config.ParseWith(doc, config.ParseOptions{Lookup: lookup(map[string]string{"HF_T": "hf_FAKE_123"})})
	if err != nil {
		t.Fatal(err)
	}
	in := f.Desired().Orgs[0].Hosts[0]
	if in.HFToken == nil || in.HFToken.Reveal() != "hf_FAKE_123" {
		t.Fatalf("hf_token = %v, want the variable's value", in.HFToken)
	}
	_, unset, err := config.ParseWith(doc, config.ParseOptions{Lookup: lookup(nil), AllowUnset: true})
	if err != nil || len(unset) != 1 || unset[0].Name != "HF_T" || unset[0].Entry != "orgs[0].hosts[0].hf_token" {
		t.Fatalf("unset with AllowUnset: %+v, %v", unset, err)
	}
	if _, _, err := config.ParseWith(doc, config.ParseOptions{Lookup: lookup(nil)}); err == nil ||
		err.Error() != "orgs[0].hosts[0].hf_token: environment variable HF_T is not set" {
		t.Fatalf("unset: %v", err)
	}
}
