package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/adminapi"
	"github.com/rolter/rolter/internal/secret"
)

// tokenState is everything a refused token request could have touched.
func (e *env) tokenState() string {
	e.t.Helper()
	_, body := e.do("GET", "/tokens?limit=1000", "")
	return body
}

func TestAdminTokens(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		now := time.Now()
		clock := now
		e.svc.SetClock(func() time.Time { return clock })

		created := e.ok("POST", "/tokens", `{"name":"ops","scope":"global"}`, 201)
		tok, _ := created["secret"].(string)
		if !strings.HasPrefix(tok, secret.PrefixAdminToken) || len(tok) < 24 || created["scope"] != "global" ||
			created["source"] != "api" || !strings.HasPrefix(tok, created["prefix"].(string)) {
			t.Fatalf("create: %v", created)
		}
		id := jsonID(created["id"])
		// The new token works at once; its secret is never shown again.
		if code, _ := e.doAuth("GET", "/orgs", "", "Bearer "+tok); code != 200 {
			t.Fatalf("new token: %d", code)
		}
		for _, p := range []string{"/tokens", "/tokens/" + id} {
			if _, body := e.do("GET", p, ""); strings.Contains(body, tok) || strings.Contains(body, `"secret"`) {
				t.Fatalf("%s shows the secret: %s", p, body)
			}
		}
		if strings.Contains(e.logs.String(), tok) {
			t.Fatal("token secret in the logs")
		}
		// Paginated like every list.
		page := e.ok("GET", "/tokens?limit=1", "", 200)
		if len(page["data"].([]any)) != 1 || page["next_cursor"] == nil {
			t.Fatalf("page 1: %v", page)
		}
		page = e.ok("GET", "/tokens?limit=1&cursor="+page["next_cursor"].(string), "", 200)
		if d := page["data"].([]any); len(d) != 1 || jsonID(d[0].(map[string]any)["id"]) != id {
			t.Fatalf("page 2: %v", page)
		}

		// Bad input: 400 naming the field, nothing stored.
		before := e.tokenState()
		for _, c := range []struct{ body, code, field string }{
			{`{}`, admin.CodeValidation, "scope"},
			{`{"scope":"global"}`, admin.CodeValidation, "name"},
			{`{"name":"x","scope":"everything"}`, admin.CodeValidation, "scope"},
			{`{"name":"x","scope":null}`, admin.CodeValidation, "scope"},
			{`{"name":"x","scope":{"org":"nope"}}`, admin.CodeValidation, "scope.org"},
			{`{"name":"x","scope":{"org":"bad name"}}`, admin.CodeValidation, "scope.org"},
			{`{"name":"x","scope":{"org":"default","role":"admin"}}`, admin.CodeValidation, "scope"},
			{`{"name":"x","scope":"global","expires_at":"2000-01-01T00:00:00Z"}`, admin.CodeValidation, "expires_at"},
			{`{"name":"x","scope":"global","secret":"ra-mine"}`, admin.CodeUnknownField, "secret"},
		} {
			errObj := e.fail("POST", "/tokens", c.body, 400, c.code)
			if f, _ := errObj["fields"].(map[string]any); f[c.field] == nil {
				t.Errorf("%s: fields %v do not name %s", c.body, errObj["fields"], c.field)
			}
		}
		if after := e.tokenState(); after != before {
			t.Fatalf("refused creates changed the tokens:\n%s\n%s", before, after)
		}

		// Revoke: refused at once, the row stays; revoking again keeps the
		// first time.
		rev := e.ok("DELETE", "/tokens/"+id, "", 200)
		if rev["revoked_at"] == nil || rev["secret"] != nil {
			t.Fatalf("revoke: %v", rev)
		}
		if code, _ := e.doAuth("GET", "/orgs", "", "Bearer "+tok); code != 401 {
			t.Fatalf("revoked token: %d", code)
		}
		clock = clock.Add(time.Minute)
		if again := e.ok("DELETE", "/tokens/"+id, "", 200); again["revoked_at"] != rev["revoked_at"] {
			t.Fatalf("second revoke moved revoked_at: %v then %v", rev["revoked_at"], again["revoked_at"])
		}
		e.fail("DELETE", "/tokens/999999", "", 404, admin.CodeNotFound)
		e.fail("GET", "/tokens/x", "", 404, admin.CodeNotFound)

		// The last live global token cannot be revoked: nobody could manage
		// anything until a restart with ROLTER_ADMIN_TOKEN.
		var firstID string
		for _, d := range e.ok("GET", "/tokens", "", 200)["data"].([]any) {
			if m := d.(map[string]any); m["name"] == "t" {
				firstID = jsonID(m["id"])
			}
		}
		before = e.tokenState()
		e.fail("DELETE", "/tokens/"+firstID, "", 409, admin.CodeLastAdminToken)
		if after := e.tokenState(); after != before {
			t.Fatal("refused revoke changed the tokens")
		}
		// An org token does not count: it manages one org only.
		e.ok("POST", "/tokens", `{"name":"org","scope":{"org":"default"}}`, 201)
		e.fail("DELETE", "/tokens/"+firstID, "", 409, admin.CodeLastAdminToken)

		// ROLTER_ADMIN_TOKEN is the environment's to change.
		envHash := secret.HashOf("env-token-FAKE-0123456789abcdef")
		if err := e.st.SetEnvAdminToken(context.Background(), &envHash, clock); err != nil {
			t.Fatal(err)
		}
		if err := e.snap.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		var envID string
		for _, d := range e.ok("GET", "/tokens", "", 200)["data"].([]any) {
			if m := d.(map[string]any); m["source"] == "env" {
				envID = jsonID(m["id"])
				if m["prefix"] != nil || m["name"] != "ROLTER_ADMIN_TOKEN" || m["scope"] != "global" {
					t.Fatalf("env token view: %v", m)
				}
			}
		}
		e.fail("DELETE", "/tokens/"+envID, "", 409, admin.CodeBootstrapToken)
		// With the env token live, the first token is no longer the last.
		e.ok("DELETE", "/tokens/"+firstID, "", 200)
		if code, _ := e.do("GET", "/orgs", ""); code != 401 {
			t.Fatalf("revoked first token: %d", code)
		}
	})
}

func TestAdminTokenExpiry(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		clock := time.Now()
		e.svc.SetClock(func() time.Time { return clock })
		exp := clock.Add(time.Hour).UTC().Format(time.RFC3339)
		created := e.ok("POST", "/tokens", `{"name":"temp","scope":"global","expires_at":"`+exp+`"}`, 201)
		tok := created["secret"].(string)
		if code, _ := e.doAuth("GET", "/orgs", "", "Bearer "+tok); code != 200 {
			t.Fatalf("token before expiry: %d", code)
		}
		clock = clock.Add(2 * time.Hour)
		if code, _ := e.doAuth("GET", "/orgs", "", "Bearer "+tok); code != 401 {
			t.Fatalf("expired token: %d", code)
		}
		// An expired global token does not count as a live one either.
		var firstID string
		for _, d := range e.ok("GET", "/tokens", "", 200)["data"].([]any) {
			if m := d.(map[string]any); m["name"] == "t" {
				firstID = jsonID(m["id"])
			}
		}
		e.fail("DELETE", "/tokens/"+firstID, "", 409, admin.CodeLastAdminToken)
	})
}

// scopeFixture fills orgs "a" and "b" with one resource of every family and
// returns the ids that stand in for the path parameters, per org.
func scopeFixture(t *testing.T, e *env) map[string]map[string]string {
	t.Helper()
	const recipe = `{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18}}`
	ids := map[string]map[string]string{}
	for i, org := range []string{"a", "b"} {
		base := "/orgs/" + org
		e.ok("POST", "/orgs", `{"name":"`+org+`"}`, 201)
		e.ok("POST", base+"/projects", `{"name":"default"}`, 201)
		pv := e.ok("POST", base+"/providers", `{"name":"pv","kind":"vllm","base_url":"http://10.0.0.5:8000/v1","keys":[{"secret":"sk-`+org+`"}]}`, 201)
		e.ok("POST", base+"/groups", `{"slug":"g","members":[{"provider":"pv"}]}`, 201)
		e.ok("POST", base+"/projects/default/routes", `{"model":"m","targets":[{"provider":"pv"}]}`, 201)
		k := e.ok("POST", base+"/projects/default/keys", `{"name":"k"}`, 201)
		h := e.ok("POST", base+"/hosts", fmt.Sprintf(`{"ip":"10.0.1.%d","port":8000,"model_name":"qwen3","recipe":%s}`, i+1, recipe), 201)
		fk := e.ok("POST", base+"/fleet-keys", `{"name":"fk"}`, 201)
		pk := pv["keys"].([]any)[0].(map[string]any)
		ids[org] = map[string]string{"org": org, "key": jsonID(k["id"]), "host": jsonID(h["id"]),
			"fleet-key": jsonID(fk["id"]), "provider-key": jsonID(pk["id"])}
	}
	return ids
}

// fill turns a route pattern's path into a request path naming real
// resources of one org.
func fill(path string, ids map[string]string) string {
	for _, r := range []struct{ from, to string }{
		{"providers/{slug}/keys/{id}", "providers/pv/keys/" + ids["provider-key"]},
		{"projects/{project}/keys/{id}", "projects/default/keys/" + ids["key"]},
		{"hosts/{id}", "hosts/" + ids["host"]},
		{"fleet-keys/{id}", "fleet-keys/" + ids["fleet-key"]},
		{"groups/{slug}", "groups/g"},
		{"{slug}", "pv"},
		{"{project}", "default"},
		{"{model...}", "m"},
		{"{org}", ids["org"]},
	} {
		path = strings.ReplaceAll(path, r.from, r.to)
	}
	return path
}

// orgState is everything of org a request could have touched.
func (e *env) orgState(org string) string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range []string{"/orgs", "/orgs/" + org, "/orgs/" + org + "/projects", "/orgs/" + org + "/providers",
		"/orgs/" + org + "/groups", "/orgs/" + org + "/hosts", "/orgs/" + org + "/fleet-keys",
		"/orgs/" + org + "/projects/default/routes", "/orgs/" + org + "/projects/default/keys", "/tokens"} {
		_, body := e.do("GET", p, "")
		b.WriteString(body)
	}
	return b.String()
}

// TestOrgTokenScope: an org token reaches every route of its own org and
// gets, for every route of another org (every family: providers, groups,
// routes, keys, usage, hosts, fleet keys, projects, slugs), the 404 a
// missing org gets, with nothing changed. Routes outside /orgs/{org} (the
// token API, creating orgs) are 404 too; the org list shows its org only.
func TestOrgTokenScope(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ids := scopeFixture(t, e)
		tok := e.ok("POST", "/tokens", `{"name":"team-a","scope":{"org":"a"}}`, 201)["secret"].(string)
		auth := "Bearer " + tok
		patterns := adminapi.NewHandler(e.svc).Patterns()

		before := e.orgState("b")
		families := map[string]bool{}
		for _, pat := range patterns {
			method, path, _ := strings.Cut(pat, " ")
			if !strings.HasPrefix(path, "/orgs/{org}") {
				continue
			}
			if f := strings.Split(path, "/"); len(f) > 3 {
				families[f[3]] = true
			}
			// The answer for an org that does not exist: a foreign org is
			// indistinguishable from none.
			const missing = `{"error":{"code":"not_found","message":"org \"b\" not found"}}` + "\n"
			if code, body := e.doAuth(method, fill(path, ids["b"]), `{}`, auth); code != 404 || body != missing {
				t.Errorf("%s with org b: %d %s", pat, code, body)
			}
		}
		for _, f := range []string{"projects", "providers", "groups", "slugs", "usage", "hosts", "fleet-keys"} {
			if !families[f] {
				t.Errorf("family %s not walked; walked %v", f, families)
			}
		}
		if after := e.orgState("b"); after != before {
			t.Fatalf("org b changed under refused requests:\n%s\n%s", before, after)
		}

		// Own org: every read answers, and writes work.
		for _, pat := range patterns {
			method, path, _ := strings.Cut(pat, " ")
			if method == "GET" && strings.HasPrefix(path, "/orgs/{org}") {
				if code, body := e.doAuth(method, fill(path, ids["a"]), "", auth); code != 200 {
					t.Errorf("%s on own org: %d %s", pat, code, body)
				}
			}
		}
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/orgs/a/projects", `{"name":"second"}`},
			{"POST", "/orgs/a/providers", `{"name":"p2","kind":"vllm","base_url":"http://10.0.0.6:8000/v1"}`},
			{"POST", "/orgs/a/projects/default/keys", `{"name":"k2"}`},
			{"PATCH", "/orgs/a", `{"description":"team a"}`},
		} {
			if code, body := e.doAuth(c.method, c.path, c.body, auth); code/100 != 2 {
				t.Errorf("%s %s on own org: %d %s", c.method, c.path, code, body)
			}
		}

		// Outside /orgs/{org}: the org list narrows, the rest is 404.
		code, body := e.doAuth("GET", "/orgs", "", auth)
		if code != 200 || !strings.Contains(body, `"name":"a"`) || strings.Contains(body, `"name":"b"`) || strings.Contains(body, `"name":"default"`) {
			t.Fatalf("org list for an org token: %d %s", code, body)
		}
		var list struct {
			Data       []json.RawMessage `json:"data"`
			NextCursor string            `json:"next_cursor"`
		}
		_, body = e.doAuth("GET", "/orgs?limit=1", "", auth)
		if json.Unmarshal([]byte(body), &list) != nil || len(list.Data) != 1 || list.NextCursor != "" {
			t.Fatalf("org list page: %s", body)
		}
		before = e.orgState("b")
		for _, pat := range patterns {
			method, path, _ := strings.Cut(pat, " ")
			if strings.HasPrefix(path, "/orgs/{org}") || pat == "GET /orgs" {
				continue
			}
			path = strings.ReplaceAll(path, "{id}", "1")
			body := `{"name":"c","scope":"global"}` // valid: a missing check would create
			if pat == "POST /orgs" {
				body = `{"name":"c"}`
			}
			if code, body := e.doAuth(method, path, body, auth); code != 404 || !strings.Contains(body, `"code":"not_found"`) {
				t.Errorf("%s for an org token: %d %s", pat, code, body)
			}
		}
		if after := e.orgState("b"); after != before {
			t.Fatalf("refused requests changed something:\n%s\n%s", before, after)
		}

		// An org with a live token of its own cannot be deleted; revoking
		// the token ends its access at once.
		e.fail("DELETE", "/orgs/a", "", 409, admin.CodeInUse)
		var id string
		for _, d := range e.ok("GET", "/tokens", "", 200)["data"].([]any) {
			if m := d.(map[string]any); m["name"] == "team-a" {
				id = jsonID(m["id"])
				if sc, _ := m["scope"].(map[string]any); sc["org"] != "a" {
					t.Fatalf("org token view: %v", m)
				}
			}
		}
		e.ok("DELETE", "/tokens/"+id, "", 200)
		if code, _ := e.doAuth("GET", "/orgs/a", "", auth); code != 401 {
			t.Fatalf("revoked org token: %d", code)
		}
	})
}

// TestOrgTokenFollowsRename: the scope is the org, not its name.
func TestOrgTokenFollowsRename(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs", `{"name":"a"}`, 201)
		tok := e.ok("POST", "/tokens", `{"name":"team-a","scope":{"org":"a"}}`, 201)["secret"].(string)
		e.ok("PATCH", "/orgs/a", `{"name":"a2"}`, 200)
		if code, _ := e.doAuth("GET", "/orgs/a2/projects", "", "Bearer "+tok); code != 200 {
			t.Fatalf("renamed own org: %d", code)
		}
		e.ok("POST", "/orgs", `{"name":"a"}`, 201) // a new org under the old name
		if code, _ := e.doAuth("GET", "/orgs/a/projects", "", "Bearer "+tok); code != 404 {
			t.Fatalf("new org under the old name: %d", code)
		}
		if v := e.ok("GET", "/tokens", "", 200)["data"].([]any)[1].(map[string]any); v["scope"].(map[string]any)["org"] != "a2" {
			t.Fatalf("token view after rename: %v", v)
		}
	})
}
