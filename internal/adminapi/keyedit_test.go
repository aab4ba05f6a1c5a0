package adminapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

func TestVirtualKeyPatch(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		const keys = "/orgs/default/projects/default/keys/"
		k := e.ok("POST", strings.TrimSuffix(keys, "/"), `{"name":"alice","models":["qwen3"],"rpm_limit":5,"expires_at":"2099-01-01T00:00:00Z"}`, 201)
		tok, id := k["secret"].(string), jsonID(k["id"])

		got := e.ok("PATCH", keys+id, `{"name":"alice-2","models":["qwen3","llama"],"rpm_limit":60,"tpm_limit":1000}`, 200)
		if got["name"] != "alice-2" || len(got["models"].([]any)) != 2 || got["rpm_limit"].(float64) != 60 ||
			got["tpm_limit"].(float64) != 1000 || got["expires_at"] != "2099-01-01T00:00:00Z" || got["secret"] != nil || got["prefix"] != k["prefix"] {
			t.Fatalf("patched key: %v", got)
		}
		// The same secret keeps working, and the data path sees the new
		// allowlist at once.
		vk, ok := e.snap.Current().Authenticate(tok, time.Now())
		if !ok || len(vk.Models) != 2 || vk.Models[1] != "llama" || vk.RPMLimit != 60 || vk.Name != "alice-2" {
			t.Fatalf("snapshot after patch: %v %+v", ok, vk)
		}
		// null clears the expiry; [] allows every model; absent fields stay.
		got = e.ok("PATCH", keys+id, `{"expires_at":null,"models":[]}`, 200)
		if got["expires_at"] != nil || len(got["models"].([]any)) != 0 || got["name"] != "alice-2" || got["rpm_limit"].(float64) != 60 {
			t.Fatalf("cleared key: %v", got)
		}
		if vk, _ := e.snap.Current().Authenticate(tok, time.Now()); vk.ExpiresAt != nil || len(vk.Models) != 0 {
			t.Fatalf("snapshot after clearing: %+v", vk)
		}

		// A budget is set, kept by other edits, and cleared by null.
		got = e.ok("PATCH", keys+id, `{"budget":{"amount":"2.5","period":"day"}}`, 200)
		if b, _ := got["budget"].(map[string]any); b == nil || b["period"] != "day" || b["amount"].(float64) != 2.5 {
			t.Fatalf("budget set: %v", got["budget"])
		}
		got = e.ok("PATCH", keys+id, `{"rpm_limit":61}`, 200)
		if b, _ := got["budget"].(map[string]any); b == nil || b["amount"].(float64) != 2.5 {
			t.Fatalf("budget lost by another edit: %v", got)
		}
		if vk, _ := e.snap.Current().Authenticate(tok, time.Now()); vk.Budget.Period != "day" {
			t.Fatalf("snapshot budget: %+v", vk.Budget)
		}
		got = e.ok("PATCH", keys+id, `{"budget":null}`, 200)
		if got["budget"] != nil {
			t.Fatalf("budget not cleared: %v", got["budget"])
		}

		// Validation as on create: 400 naming the field, nothing changed.
		before := e.state()
		for _, c := range []struct{ body, code, field string }{
			{`{"name":""}`, admin.CodeValidation, "name"},
			{`{"models":["two words"]}`, admin.CodeValidation, "models[0]"},
			{`{"rpm_limit":-1}`, admin.CodeValidation, "rpm_limit"},
			{`{"tpm_limit":-1}`, admin.CodeValidation, "tpm_limit"},
			{`{"expires_at":"2000-01-01T00:00:00Z"}`, admin.CodeValidation, "expires_at"},
			{`{"expires_at":"soon"}`, admin.CodeValidation, "expires_at"},
			{`{"rpm_limit":"many"}`, admin.CodeValidation, "rpm_limit"},
			{`{"secret":"rk-mine"}`, admin.CodeUnknownField, "secret"},
			{`{"budget":{"amount":"1","period":"year"}}`, admin.CodeValidation, "budget.period"},
			{`{"budget":{"amount":"-1","period":"day"}}`, admin.CodeValidation, "budget.amount"},
		} {
			errObj := e.fail("PATCH", keys+id, c.body, 400, c.code)
			if f, _ := errObj["fields"].(map[string]any); f[c.field] == nil {
				t.Errorf("%s: fields %v do not name %s", c.body, errObj["fields"], c.field)
			}
		}
		e.fail("PATCH", keys+"999999", `{"name":"x"}`, 404, admin.CodeNotFound)
		if after := e.state(); after != before {
			t.Fatalf("refused patches changed state:\n%s\n%s", before, after)
		}

		// A revoked key cannot be edited.
		e.ok("DELETE", keys+id, "", 200)
		before = e.state()
		e.fail("PATCH", keys+id, `{"models":["qwen3"]}`, 409, admin.CodeKeyRevoked)
		if after := e.state(); after != before {
			t.Fatal("refused patch of a revoked key changed state")
		}
	})
}

func TestVirtualKeyPurgeLetsProjectGo(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.ok("POST", "/orgs/default/projects", `{"name":"gone"}`, 201)
		e.ok("POST", "/orgs/default/providers", `{"name":"pv","kind":"vllm","base_url":"http://10.0.0.5:8000/v1"}`, 201)
		e.ok("POST", "/orgs/default/projects/gone/routes", `{"model":"m","targets":[{"provider":"pv"}]}`, 201)
		const keys = "/orgs/default/projects/gone/keys/"
		var ids, toks []string
		for _, n := range []string{"a", "b"} {
			k := e.ok("POST", strings.TrimSuffix(keys, "/"), `{"name":"`+n+`"}`, 201)
			ids, toks = append(ids, jsonID(k["id"])), append(toks, k["secret"].(string))
		}
		// Usage history of a key outlives the key.
		org, _ := e.st.GetOrg(ctx, "default")
		pj, _ := e.st.GetProject(ctx, org.ID, "gone")
		vk, _ := e.snap.Current().Authenticate(toks[0], time.Now())
		if err := e.st.InsertUsage(ctx, []store.UsageRecord{{OrgID: org.ID, ProjectID: pj.ID, KeyID: vk.ID,
			AddressKind: "route", Address: "m", Route: "m", Status: 200, PromptTokens: 7}}); err != nil {
			t.Fatal(err)
		}

		e.fail("DELETE", "/orgs/default/projects/gone", "", 409, admin.CodeInUse)
		before := e.state()
		e.fail("DELETE", keys+ids[0]+"?purge=true", "", 409, admin.CodeKeyNotRevoked)
		e.fail("DELETE", keys+ids[0]+"?purge=maybe", "", 400, admin.CodeValidation)
		if after := e.state(); after != before {
			t.Fatal("refused purge changed state")
		}
		if _, ok := e.snap.Current().Authenticate(toks[0], time.Now()); !ok {
			t.Fatal("refused purge stopped the key")
		}

		for _, id := range ids {
			e.ok("DELETE", keys+id, "", 200)
			e.ok("DELETE", keys+id+"?purge=true", "", 204)
			e.fail("GET", keys+id, "", 404, admin.CodeNotFound)
			e.fail("DELETE", keys+id+"?purge=true", "", 404, admin.CodeNotFound)
		}
		if _, ok := e.snap.Current().Authenticate(toks[0], time.Now()); ok {
			t.Fatal("purged key authenticates")
		}
		e.fail("DELETE", "/orgs/default/projects/gone", "", 409, admin.CodeInUse) // the route
		e.ok("DELETE", "/orgs/default/projects/gone/routes/m", "", 204)
		e.ok("DELETE", "/orgs/default/projects/gone", "", 204)
		e.fail("GET", "/orgs/default/projects/gone", "", 404, admin.CodeNotFound)

		_, body := e.do("GET", "/orgs/default/usage", "")
		if !strings.Contains(body, `"key_id":`+jsonID(vk.ID)) || !strings.Contains(body, `"prompt_tokens":7`) {
			t.Fatalf("usage after the key and project went: %s", body)
		}
	})
}
