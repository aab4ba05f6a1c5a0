package adminapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/adminapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

const adminToken = "ra-test-admin-token-FAKE-0001"

type env struct {
	t    *testing.T
	srv  *httptest.Server
	snap *snapshot.Holder
	st   store.Store
	svc  *admin.Service
	logs *bytes.Buffer
}

// newEnv serves the admin API over a real store with one admin token and
// the default org and project.
func newEnv(t *testing.T, dialect string, sealer *secret.Sealer) *env {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, dialect, sealer)
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := db.CreateAdminToken(ctx, &store.AdminToken{Name: "t", Hash: secret.HashOf(adminToken)}); err != nil {
		t.Fatal(err)
	}
	h := snapshot.NewHolder(db, log)
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	svc := admin.NewService(db, h, log)
	srv := httptest.NewServer(adminapi.NewHandler(svc))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, snap: h, st: db, svc: svc, logs: logs}
	e.ok("POST", "/orgs", `{"name":"default"}`, 201)
	e.ok("POST", "/orgs/default/projects", `{"name":"default"}`, 201)
	return e
}

// do sends a request with the admin token and returns status and body.
func (e *env) do(method, path, body string) (int, string) {
	return e.doAuth(method, path, body, "Bearer "+adminToken)
}

func (e *env) doAuth(method, path, body, auth string) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+adminapi.Prefix+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ok asserts the status and decodes the JSON body into a map.
func (e *env) ok(method, path, body string, want int) map[string]any {
	e.t.Helper()
	code, out := e.do(method, path, body)
	if code != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
	}
	m := map[string]any{}
	if out != "" {
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %q", method, path, out)
		}
	}
	return m
}

// fail asserts an error status and code in the one error shape.
func (e *env) fail(method, path, body string, status int, code string) map[string]any {
	e.t.Helper()
	m := e.ok(method, path, body, status)
	errObj, _ := m["error"].(map[string]any)
	if errObj == nil || errObj["code"] != code || errObj["message"] == "" {
		e.t.Fatalf("%s %s: want error code %q, got %v", method, path, code, m)
	}
	return errObj
}

func each(t *testing.T, fn func(t *testing.T, e *env)) {
	storetest.EachWith(t, func(t *testing.T, d string) *env { return newEnv(t, d, nil) }, fn)
}

func TestAuth(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		var bodies []string
		for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic " + adminToken, "Bearer " + adminToken + "x", adminToken} {
			code, body := e.doAuth("GET", "/orgs", "", auth)
			if code != 401 {
				t.Fatalf("auth %q: status %d", auth, code)
			}
			bodies = append(bodies, body)
		}
		// Unknown paths are not revealed to unauthenticated callers either.
		code, body := e.doAuth("GET", "/nope", "", "Bearer wrong")
		if code != 401 {
			t.Fatalf("unknown path without auth: %d", code)
		}
		bodies = append(bodies, body)
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Fatalf("401 bodies differ: %q vs %q", b, bodies[0])
			}
		}
		if !strings.Contains(bodies[0], `"code":"unauthorized"`) {
			t.Fatalf("401 body: %s", bodies[0])
		}
		e.ok("GET", "/orgs", "", 200)
	})
}

func TestCRUD(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		p := e.ok("POST", "/orgs/default/providers", `{"name": "vLLM Moscow", "kind": "vllm",
			"base_url": "http://10.0.0.5:8000/v1/", "keys": [{"secret": "sk-a", "weight": 2}, {"secret": "sk-b"}]}`, 201)
		if p["slug"] != "vllm-moscow" || p["base_url"] != "http://10.0.0.5:8000/v1" {
			t.Fatalf("provider: %v", p)
		}
		keys := p["keys"].([]any)
		if len(keys) != 2 || keys[0].(map[string]any)["weight"].(float64) != 2 || keys[1].(map[string]any)["weight"].(float64) != 1 {
			t.Fatalf("keys: %v", keys)
		}
		e.ok("POST", "/orgs/default/providers", `{"name":"second","slug":"vllm-spb","kind":"sglang","base_url":"https://b.example/v1"}`, 201)
		r := e.ok("POST", "/orgs/default/projects/default/routes", `{"model": "team/qwen3", "targets": [
			{"provider": "vllm-moscow", "upstream_model": "Qwen/Qwen3-8B", "weight": 3}, {"provider": "vllm-spb"}],
			"policy": {"max_output_tokens": 4096, "tools": "allow", "media": "deny", "max_concurrency": 64}}`, 201)
		if r["strategy"] != "weighted" || len(r["targets"].([]any)) != 2 {
			t.Fatalf("route: %v", r)
		}
		// Route names contain '/', so the path escapes them.
		got := e.ok("GET", "/orgs/default/projects/default/routes/"+url.PathEscape("team/qwen3"), "", 200)
		if got["model"] != "team/qwen3" || got["policy"].(map[string]any)["max_concurrency"].(float64) != 64 {
			t.Fatalf("get route: %v", got)
		}
		e.ok("GET", "/orgs/default/projects/default/routes/team/qwen3", "", 200)
		upd := e.ok("PATCH", "/orgs/default/projects/default/routes/team%2Fqwen3", `{"strategy":"least_busy","targets":[{"provider":"vllm-spb","weight":5}]}`, 200)
		if upd["strategy"] != "least_busy" || len(upd["targets"].([]any)) != 1 || upd["policy"].(map[string]any)["tools"] != "allow" {
			t.Fatalf("patched route: %v", upd)
		}
		// The snapshot follows every write.
		snap := e.snap.Current()
		rt := snap.Org("default").Projects.At("default").Routes.At("team/qwen3")
		if rt == nil || rt.Strategy != "least_busy" || rt.Targets[0].Provider.Slug != "vllm-spb" {
			t.Fatalf("snapshot route: %+v", rt)
		}
		k := e.ok("POST", "/orgs/default/projects/default/keys", `{"name":"ci","models":["team/qwen3","vllm-spb/*"],"expires_at":"2099-01-01T00:00:00Z"}`, 201)
		tok, _ := k["secret"].(string)
		if !strings.HasPrefix(tok, secret.PrefixVirtualKey) {
			t.Fatalf("key: %v", k)
		}
		id := jsonID(k["id"])
		if _, ok := e.snap.Current().Authenticate(tok, time.Now()); !ok {
			t.Fatal("new key does not authenticate")
		}
		rev := e.ok("DELETE", "/orgs/default/projects/default/keys/"+id, "", 200)
		if rev["revoked_at"] == nil {
			t.Fatalf("revoke: %v", rev)
		}
		if _, ok := e.snap.Current().Authenticate(tok, time.Now()); ok {
			t.Fatal("revoked key still authenticates")
		}
		e.ok("DELETE", "/orgs/default/projects/default/routes/team%2Fqwen3", "", 204)
		e.fail("GET", "/orgs/default/projects/default/routes/team%2Fqwen3", "", 404, admin.CodeNotFound)
		// Orgs and projects.
		e.ok("POST", "/orgs", `{"name":"acme","description":"x"}`, 201)
		e.ok("PATCH", "/orgs/acme", `{"description":"y"}`, 200)
		if o := e.ok("GET", "/orgs/acme", "", 200); o["description"] != "y" {
			t.Fatalf("org: %v", o)
		}
		e.ok("POST", "/orgs/acme/projects", `{"name":"p1"}`, 201)
		e.fail("DELETE", "/orgs/acme", "", 409, admin.CodeInUse)
		e.ok("DELETE", "/orgs/acme/projects/p1", "", 204)
		e.ok("DELETE", "/orgs/acme", "", 204)
		e.fail("GET", "/orgs/acme", "", 404, admin.CodeNotFound)
	})
}

func jsonID(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// state is everything a bad request could have touched.
func (e *env) state() string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range []string{"/orgs", "/orgs/default/projects", "/orgs/default/providers",
		"/orgs/default/projects/default/routes", "/orgs/default/projects/default/keys"} {
		_, body := e.do("GET", p, "")
		b.WriteString(body)
	}
	return b.String()
}

func TestBadInputChangesNothing(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"name":"vllm","kind":"vllm","base_url":"http://a:1/v1","keys":[{"secret":"sk-1"}]}`, 201)
		e.ok("POST", "/orgs/default/projects/default/routes", `{"model":"qwen3","targets":[{"provider":"vllm"}]}`, 201)
		before := e.state()
		cases := []struct {
			name, method, path, body string
			status                   int
			code, field              string
		}{
			{"invalid base_url", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"not a url"}`, 400, admin.CodeValidation, "base_url"},
			{"base_url with credentials", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://u:p@h/v1"}`, 400, admin.CodeValidation, "base_url"},
			{"unknown kind", "POST", "/orgs/default/providers", `{"name":"x","kind":"bedrock","base_url":"http://h/v1"}`, 400, admin.CodeValidation, "kind"},
			{"bad slug", "POST", "/orgs/default/providers", `{"name":"x","slug":"Bad_Slug","kind":"vllm","base_url":"http://h/v1"}`, 400, admin.CodeValidation, "slug"},
			{"name without alphanumerics", "POST", "/orgs/default/providers", `{"name":"ÐœÐ¾ÑÐºÐ²Ð°","kind":"vllm","base_url":"http://h/v1"}`, 400, admin.CodeValidation, "slug"},
			{"slug taken", "POST", "/orgs/default/providers", `{"name":"vllm","kind":"vllm","base_url":"http://h/v1"}`, 409, admin.CodeSlugTaken, "slug"},
			{"upstream with context_limit", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","metadata_source":"upstream","context_limit":4096}`, 400, admin.CodeValidation, "context_limit"},
			{"empty key secret", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","keys":[{"weight":1}]}`, 400, admin.CodeValidation, "keys[0].secret"},
			{"negative weight", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","keys":[{"secret":"s","weight":-1}]}`, 400, admin.CodeValidation, "keys[0].weight"},
			{"bad duration", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","idle_timeout":"soon"}`, 400, admin.CodeInvalidJSON, ""},
			{"unknown field", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","colour":"red"}`, 400, admin.CodeUnknownField, "colour"},
			{"unknown nested field", "POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[{"provider":"vllm","wieght":1}]}`, 400, admin.CodeUnknownField, "wieght"},
			{"invalid JSON", "POST", "/orgs/default/providers", `{"name":`, 400, admin.CodeInvalidJSON, ""},
			{"not JSON", "POST", "/orgs/default/providers", `hello`, 400, admin.CodeInvalidJSON, ""},
			{"two objects", "POST", "/orgs/default/providers", `{"name":"a","kind":"vllm","base_url":"http://h/v1"}{}`, 400, admin.CodeInvalidJSON, ""},
			{"empty body", "POST", "/orgs/default/providers", ``, 400, admin.CodeInvalidJSON, ""},
			{"wrong type", "POST", "/orgs/default/providers", `{"name":1,"kind":"vllm","base_url":"http://h/v1"}`, 400, admin.CodeValidation, "name"},
			{"duration as a number", "POST", "/orgs/default/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1","idle_timeout":30}`, 400, admin.CodeValidation, "idle_timeout"},
			{"route with unknown provider", "POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[{"provider":"vllm"},{"provider":"ghost"}]}`, 400, admin.CodeUnknownProvider, "targets[1].provider"},
			{"route without targets", "POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[]}`, 400, admin.CodeValidation, "targets"},
			{"duplicate route", "POST", "/orgs/default/projects/default/routes", `{"model":"qwen3","targets":[{"provider":"vllm"}]}`, 409, admin.CodeConflict, ""},
			{"bad strategy", "POST", "/orgs/default/projects/default/routes", `{"model":"m","strategy":"fastest","targets":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "strategy"},
			{"bad policy", "POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[{"provider":"vllm"}],"policy":{"tools":"maybe"}}`, 400, admin.CodeValidation, "policy.tools"},
			{"route model with space", "POST", "/orgs/default/projects/default/routes", `{"model":"a b","targets":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "model"},
			{"patch route to unknown provider", "PATCH", "/orgs/default/projects/default/routes/qwen3", `{"targets":[{"provider":"ghost"}]}`, 400, admin.CodeUnknownProvider, "targets[0].provider"},
			{"patch slug without allow", "PATCH", "/orgs/default/providers/vllm", `{"slug":"vllm-new"}`, 400, admin.CodeSlugImmutable, "slug"},
			{"patch bad base_url", "PATCH", "/orgs/default/providers/vllm", `{"base_url":"ftp://x"}`, 400, admin.CodeValidation, "base_url"},
			{"key expired", "POST", "/orgs/default/projects/default/keys", `{"name":"k","expires_at":"2001-01-01T00:00:00Z"}`, 400, admin.CodeValidation, "expires_at"},
			{"key without name", "POST", "/orgs/default/projects/default/keys", `{}`, 400, admin.CodeValidation, "name"},
			{"duplicate org", "POST", "/orgs", `{"name":"default"}`, 409, admin.CodeConflict, ""},
			{"bad org name", "POST", "/orgs", `{"name":"has space"}`, 400, admin.CodeValidation, "name"},
			{"unknown org", "POST", "/orgs/nope/providers", `{"name":"x","kind":"vllm","base_url":"http://h/v1"}`, 404, admin.CodeNotFound, ""},
			{"unknown project", "POST", "/orgs/default/projects/nope/routes", `{"model":"m","targets":[{"provider":"vllm"}]}`, 404, admin.CodeNotFound, ""},
			{"bad limit", "GET", "/orgs?limit=0", ``, 400, admin.CodeValidation, "limit"},
			{"bad cursor", "GET", "/orgs?cursor=abc", ``, 400, admin.CodeValidation, "cursor"},
			{"unknown path", "GET", "/nope", ``, 404, admin.CodeNotFound, ""},
			{"wrong method", "PUT", "/orgs", `{}`, 405, admin.CodeMethodNotAllowed, ""},
			{"delete provider key of other id", "DELETE", "/orgs/default/providers/vllm/keys/999999", ``, 404, admin.CodeNotFound, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				errObj := e.fail(c.method, c.path, c.body, c.status, c.code)
				if c.field != "" {
					fields, _ := errObj["fields"].(map[string]any)
					if _, ok := fields[c.field]; !ok {
						t.Fatalf("error does not name field %q: %v", c.field, errObj)
					}
				}
				if after := e.state(); after != before {
					t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}

func TestSlugs(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"name":"vllm","kind":"vllm","base_url":"http://a/v1"}`, 201)
		errObj := e.fail("POST", "/orgs/default/providers", `{"name":"VLLM!","kind":"vllm","base_url":"http://a/v1"}`, 409, admin.CodeSlugTaken)
		if errObj["suggestion"] != "vllm-2" {
			t.Fatalf("suggestion: %v", errObj)
		}
		if c := e.ok("GET", "/orgs/default/slugs/vllm", "", 200); c["available"] != false || c["suggestion"] != "vllm-2" {
			t.Fatalf("slug check: %v", c)
		}
		if c := e.ok("GET", "/orgs/default/slugs/free", "", 200); c["available"] != true {
			t.Fatalf("slug check: %v", c)
		}
		e.fail("GET", "/orgs/default/slugs/NOT_A_SLUG", "", 400, admin.CodeValidation)
		// Renaming the display name never touches the slug.
		if p := e.ok("PATCH", "/orgs/default/providers/vllm", `{"name":"Something else"}`, 200); p["slug"] != "vllm" {
			t.Fatalf("rename: %v", p)
		}
		p := e.ok("PATCH", "/orgs/default/providers/vllm?allow_slug_change=true", `{"slug":"vllm-msk"}`, 200)
		if p["slug"] != "vllm-msk" || len(p["warnings"].([]any)) != 1 {
			t.Fatalf("slug change: %v", p)
		}
		// Soft delete: out of the snapshot, slug still reserved.
		e.ok("DELETE", "/orgs/default/providers/vllm-msk", "", 204)
		if e.snap.Current().Org("default").Providers.At("vllm-msk") != nil {
			t.Fatal("soft-deleted provider still routable")
		}
		if g := e.ok("GET", "/orgs/default/providers/vllm-msk", "", 200); g["deleted_at"] == nil {
			t.Fatalf("deleted provider: %v", g)
		}
		e.fail("POST", "/orgs/default/providers", `{"name":"x","slug":"vllm-msk","kind":"vllm","base_url":"http://a/v1"}`, 409, admin.CodeSlugTaken)
		e.fail("PATCH", "/orgs/default/providers/vllm-msk", `{"name":"y"}`, 404, admin.CodeNotFound)
		e.ok("DELETE", "/orgs/default/providers/vllm-msk?purge=true", "", 204)
		e.ok("POST", "/orgs/default/providers", `{"name":"x","slug":"vllm-msk","kind":"vllm","base_url":"http://a/v1"}`, 201)
	})
}

func TestPagination(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"name":"p","kind":"vllm","base_url":"http://a/v1"}`, 201)
		for _, m := range []string{"a", "b", "c", "d", "e"} {
			e.ok("POST", "/orgs/default/projects/default/routes", `{"model":"`+m+`","targets":[{"provider":"p"}]}`, 201)
		}
		var got []string
		path := "/orgs/default/projects/default/routes?limit=2"
		for pages := 0; ; pages++ {
			m := e.ok("GET", path, "", 200)
			for _, r := range m["data"].([]any) {
				got = append(got, r.(map[string]any)["model"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				if pages != 2 {
					t.Fatalf("pages: %d", pages+1)
				}
				break
			}
			path = "/orgs/default/projects/default/routes?limit=2&cursor=" + next
		}
		if strings.Join(got, "") != "abcde" {
			t.Fatalf("paged routes: %v", got)
		}
	})
}

// TestSecretsShownOnce: a provider key and a virtual key appear in the
// create response of the virtual key only, and nowhere after: not in GET or
// list responses, not in errors, not in logs, not at rest in plain text.
func TestSecretsShownOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		sealer, _ := secret.NewSealer(secret.New("0a58c26075cf80c03cfee12e0e8f40ad0c4d53393382a61589e2842688bd435e"))
		e := newEnv(t, d, sealer)
		const provSecret = "sk-provider-FAKE-0003"
		const provSecret2 = "sk-provider-FAKE-0004"
		var responses []string
		code, body := e.do("POST", "/orgs/default/providers", `{"name":"p","kind":"openai","base_url":"https://api.example/v1","keys":[{"secret":"`+provSecret+`"}]}`)
		if code != 201 {
			t.Fatal(body)
		}
		responses = append(responses, body)
		_, body = e.do("POST", "/orgs/default/providers/p/keys", `{"secret":"`+provSecret2+`","weight":2}`)
		responses = append(responses, body)
		// A failing create that carries a secret must not echo it.
		_, body = e.do("POST", "/orgs/default/providers", `{"name":"q","kind":"nope","base_url":"x","keys":[{"secret":"`+provSecret+`"}]}`)
		responses = append(responses, body)
		_, body = e.do("POST", "/orgs/default/providers", `{"name":"q","kind":"vllm","base_url":"http://h/v1","keys":[{"secret":12}]}`)
		responses = append(responses, body)
		k := e.ok("POST", "/orgs/default/projects/default/keys", `{"name":"ci"}`, 201)
		vk := k["secret"].(string)
		id := jsonID(k["id"])
		for _, p := range []string{"/orgs/default/providers", "/orgs/default/providers/p", "/orgs/default/providers/p/keys",
			"/orgs/default/projects/default/keys", "/orgs/default/projects/default/keys/" + id} {
			_, body := e.do("GET", p, "")
			responses = append(responses, body)
		}
		_, body = e.do("DELETE", "/orgs/default/projects/default/keys/"+id, "")
		responses = append(responses, body)
		_, body = e.doAuth("GET", "/orgs", "", "Bearer "+vk) // a virtual key is not an admin token
		responses = append(responses, body)
		for _, s := range []string{provSecret, provSecret2, vk, adminToken, "master-key-FAKE-0002"} {
			for _, r := range responses {
				if strings.Contains(r, s) {
					t.Errorf("secret %q in response %s", s, r)
				}
			}
			if strings.Contains(e.logs.String(), s) {
				t.Errorf("secret %q in logs", s)
			}
		}
		// Provider secrets are sealed at rest.
		st, err := e.st.Load(context.Background())
		if err != nil || st.Providers[0].Keys[0].Secret.Reveal() != provSecret {
			t.Fatalf("load: %v", err)
		}
	})
}

func TestTargetContextLimit(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"name":"conf","kind":"vllm","base_url":"http://a/v1","context_limit":32768}`, 201)
		e.ok("POST", "/orgs/default/providers", `{"name":"disc","kind":"vllm","base_url":"http://b/v1","metadata_source":"upstream"}`, 201)
		r := e.ok("POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[{"provider":"conf","context_limit":8192}]}`, 201)
		if tg := r["targets"].([]any)[0].(map[string]any); tg["context_limit"].(float64) != 8192 {
			t.Fatalf("target: %v", tg)
		}
		before := e.state()
		e.fail("POST", "/orgs/default/projects/default/routes", `{"model":"n","targets":[{"provider":"disc","context_limit":8192}]}`, 400, admin.CodeValidation)
		e.fail("POST", "/orgs/default/projects/default/routes", `{"model":"n","targets":[{"provider":"conf","context_limit":-1}]}`, 400, admin.CodeValidation)
		if e.state() != before {
			t.Fatal("a refused route changed the store")
		}
	})
}
