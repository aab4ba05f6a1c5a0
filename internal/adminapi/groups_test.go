package adminapi_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// groupMembers returns "slug:weight" for each member of a group view.
func groupMembers(t *testing.T, g map[string]any) []string {
	t.Helper()
	var out []string
	for _, m := range g["members"].([]any) {
		mm := m.(map[string]any)
		out = append(out, mm["provider"].(string)+":"+jsonID(mm["weight"]))
	}
	return out
}

func (e *env) providers(slugs ...string) {
	e.t.Helper()
	for _, s := range slugs {
		e.ok("POST", "/orgs/default/providers", `{"slug":"`+s+`","kind":"vllm","base_url":"http://10.0.0.5:8000/v1"}`, 201)
	}
}

func TestGroupsCRUD(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("vllm-msk-1", "vllm-msk-2", "vllm-nsk-1")
		g := e.ok("POST", "/orgs/default/groups", `{"name":"vLLM cluster","members":[
			{"provider":"vllm-msk-1","weight":3,"model_map":{"qwen3":"Qwen/Qwen3-8B"}},{"provider":"vllm-msk-2"}]}`, 201)
		if g["slug"] != "vllm-cluster" || g["name"] != "vLLM cluster" || g["strategy"] != "weighted" || g["created_at"] == nil ||
			!reflect.DeepEqual(groupMembers(t, g), []string{"vllm-msk-1:3", "vllm-msk-2:1"}) {
			t.Fatalf("created group: %v", g)
		}
		m0 := g["members"].([]any)[0].(map[string]any)
		if !reflect.DeepEqual(m0["model_map"], map[string]any{"qwen3": "Qwen/Qwen3-8B"}) {
			t.Fatalf("model_map: %v", m0)
		}
		if mm, ok := g["members"].([]any)[1].(map[string]any)["model_map"].(map[string]any); !ok || len(mm) != 0 {
			t.Fatalf("an absent model_map shows as {}: %v", g["members"])
		}
		if got := e.ok("GET", "/orgs/default/groups/vllm-cluster", "", 200); !reflect.DeepEqual(got, g) {
			t.Fatalf("get differs from create:\n%v\n%v", got, g)
		}
		// A slug alone names the group too; overlapping groups are fine.
		all := e.ok("POST", "/orgs/default/groups", `{"slug":"vllm-all","strategy":"round_robin","members":[
			{"provider":"vllm-msk-1"},{"provider":"vllm-msk-2"},{"provider":"vllm-nsk-1","weight":0}]}`, 201)
		if all["name"] != "vllm-all" || all["strategy"] != "round_robin" || len(all["members"].([]any)) != 3 {
			t.Fatalf("overlapping group: %v", all)
		}
		l := e.ok("GET", "/orgs/default/groups?limit=1", "", 200)
		if data := l["data"].([]any); len(data) != 1 || data[0].(map[string]any)["slug"] != "vllm-cluster" || l["next_cursor"] == nil {
			t.Fatalf("list page 1: %v", l)
		}
		l = e.ok("GET", "/orgs/default/groups?limit=1&cursor="+l["next_cursor"].(string), "", 200)
		if data := l["data"].([]any); len(data) != 1 || data[0].(map[string]any)["slug"] != "vllm-all" {
			t.Fatalf("list page 2: %v", l)
		}
		// PATCH: absent fields stay; members replace the list.
		p := e.ok("PATCH", "/orgs/default/groups/vllm-cluster", `{"name":"Moscow"}`, 200)
		if p["name"] != "Moscow" || p["strategy"] != "weighted" || len(p["members"].([]any)) != 2 || p["warnings"] != nil {
			t.Fatalf("patch name: %v", p)
		}
		p = e.ok("PATCH", "/orgs/default/groups/vllm-cluster", `{"strategy":"least_busy","members":[{"provider":"vllm-nsk-1","weight":5}]}`, 200)
		if p["name"] != "Moscow" || p["strategy"] != "least_busy" || !reflect.DeepEqual(groupMembers(t, p), []string{"vllm-nsk-1:5"}) {
			t.Fatalf("patch members: %v", p)
		}
		if got := e.ok("GET", "/orgs/default/groups/vllm-cluster", "", 200); !reflect.DeepEqual(groupMembers(t, got), []string{"vllm-nsk-1:5"}) {
			t.Fatalf("members after patch: %v", got)
		}
		// Slug change with the opt-in: warned, the old slug is free.
		p = e.ok("PATCH", "/orgs/default/groups/vllm-cluster?allow_slug_change=true", `{"slug":"vllm-nsk"}`, 200)
		if p["slug"] != "vllm-nsk" || len(p["warnings"].([]any)) != 1 || !strings.Contains(p["warnings"].([]any)[0].(string), "vllm-cluster") {
			t.Fatalf("slug change: %v", p)
		}
		e.fail("GET", "/orgs/default/groups/vllm-cluster", "", 404, admin.CodeNotFound)
		if c := e.ok("GET", "/orgs/default/slugs/vllm-cluster", "", 200); c["available"] != true {
			t.Fatalf("old slug after the change: %v", c)
		}
		if c := e.ok("GET", "/orgs/default/slugs/vllm-nsk", "", 200); c["available"] != false {
			t.Fatalf("new slug after the change: %v", c)
		}
		// DELETE soft-deletes (design 000 §3): the slug stays reserved
		// until purge=true frees it.
		e.ok("DELETE", "/orgs/default/groups/vllm-nsk", "", 204)
		if g := e.ok("GET", "/orgs/default/groups/vllm-nsk", "", 200); g["deleted_at"] == nil {
			t.Fatalf("deleted group: %v", g)
		}
		e.fail("DELETE", "/orgs/default/groups/vllm-nsk", "", 404, admin.CodeNotFound)
		e.fail("PATCH", "/orgs/default/groups/vllm-nsk", `{"name":"x"}`, 404, admin.CodeNotFound)
		e.fail("POST", "/orgs/default/providers", `{"slug":"vllm-nsk","kind":"vllm","base_url":"http://h/v1"}`, 409, admin.CodeSlugTaken)
		e.ok("DELETE", "/orgs/default/groups/vllm-nsk?purge=true", "", 204)
		e.fail("GET", "/orgs/default/groups/vllm-nsk", "", 404, admin.CodeNotFound)
		e.ok("POST", "/orgs/default/providers", `{"slug":"vllm-nsk","kind":"vllm","base_url":"http://h/v1"}`, 201)
		// The store's snapshot source sees the remaining group.
		st, err := e.st.Load(context.Background())
		if err != nil || len(st.Groups) != 1 || st.Groups[0].Slug != "vllm-all" || len(st.Groups[0].Members) != 3 {
			t.Fatalf("load: %+v %v", st.Groups, err)
		}
		// Groups belong to their org.
		e.ok("POST", "/orgs", `{"name":"acme"}`, 201)
		e.fail("GET", "/orgs/acme/groups/vllm-all", "", 404, admin.CodeNotFound)
		if l := e.ok("GET", "/orgs/acme/groups", "", 200); len(l["data"].([]any)) != 0 {
			t.Fatalf("acme groups: %v", l)
		}
		e.fail("POST", "/orgs/acme/groups", `{"slug":"x","members":[{"provider":"vllm-msk-1"}]}`, 400, admin.CodeUnknownProvider)
		// A provider that is a member cannot be purged until it leaves.
		e.fail("DELETE", "/orgs/default/providers/vllm-msk-1?purge=true", "", 409, admin.CodeInUse)
	})
}

// groupState is everything a bad group request could have touched.
func (e *env) groupState() string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range []string{"/orgs/default/providers", "/orgs/default/groups"} {
		_, body := e.do("GET", p, "")
		b.WriteString(body)
	}
	return b.String()
}

func TestGroupBadInputChangesNothing(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("vllm", "gone")
		e.ok("DELETE", "/orgs/default/providers/gone", "", 204)
		e.ok("POST", "/orgs/default/groups", `{"slug":"cluster","members":[{"provider":"vllm"}]}`, 201)
		before := e.groupState()
		cases := []struct {
			name, method, path, body string
			status                   int
			code, field              string
		}{
			{"slug of a provider", "POST", "/orgs/default/groups", `{"slug":"vllm","members":[{"provider":"vllm"}]}`, 409, admin.CodeSlugTaken, "slug"},
			{"slug of a group", "POST", "/orgs/default/groups", `{"name":"Cluster","members":[{"provider":"vllm"}]}`, 409, admin.CodeSlugTaken, "slug"},
			{"slug of a soft-deleted provider", "POST", "/orgs/default/groups", `{"slug":"gone","members":[{"provider":"vllm"}]}`, 409, admin.CodeSlugTaken, "slug"},
			{"unknown provider", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm"},{"provider":"ghost"}]}`, 400, admin.CodeUnknownProvider, "members[1].provider"},
			{"deleted provider", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"gone"}]}`, 400, admin.CodeUnknownProvider, "members[0].provider"},
			{"group in group", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm"},{"provider":"cluster"}]}`, 400, admin.CodeValidation, "members[1].provider"},
			{"duplicate member", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm"},{"provider":"vllm","weight":2}]}`, 400, admin.CodeValidation, "members[1].provider"},
			{"no members", "POST", "/orgs/default/groups", `{"slug":"g","members":[]}`, 400, admin.CodeValidation, "members"},
			{"members missing", "POST", "/orgs/default/groups", `{"slug":"g"}`, 400, admin.CodeValidation, "members"},
			{"member without provider", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"weight":1}]}`, 400, admin.CodeValidation, "members[0].provider"},
			{"bad weight", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm","weight":-1}]}`, 400, admin.CodeValidation, "members[0].weight"},
			{"model_map key with space", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm","model_map":{"a b":"c"}}]}`, 400, admin.CodeValidation, "members[0].model_map"},
			{"model_map empty value", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm","model_map":{"a":""}}]}`, 400, admin.CodeValidation, "members[0].model_map"},
			{"bad strategy", "POST", "/orgs/default/groups", `{"slug":"g","strategy":"fastest","members":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "strategy"},
			{"bad slug", "POST", "/orgs/default/groups", `{"slug":"Bad_Slug","members":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "slug"},
			{"no slug and no name", "POST", "/orgs/default/groups", `{"members":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "name"},
			{"name without alphanumerics", "POST", "/orgs/default/groups", `{"name":"Москва","members":[{"provider":"vllm"}]}`, 400, admin.CodeValidation, "slug"},
			{"unknown field", "POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"vllm","upstream":"x"}]}`, 400, admin.CodeUnknownField, "upstream"},
			{"unknown org", "POST", "/orgs/nope/groups", `{"slug":"g","members":[{"provider":"vllm"}]}`, 404, admin.CodeNotFound, ""},
			{"patch slug without allow", "PATCH", "/orgs/default/groups/cluster", `{"slug":"cluster-2"}`, 400, admin.CodeSlugImmutable, "slug"},
			{"patch slug onto a provider", "PATCH", "/orgs/default/groups/cluster?allow_slug_change=true", `{"slug":"vllm"}`, 409, admin.CodeSlugTaken, "slug"},
			{"patch to a deleted member", "PATCH", "/orgs/default/groups/cluster", `{"members":[{"provider":"gone"}]}`, 400, admin.CodeUnknownProvider, "members[0].provider"},
			{"patch to itself as member", "PATCH", "/orgs/default/groups/cluster", `{"members":[{"provider":"cluster"}]}`, 400, admin.CodeValidation, "members[0].provider"},
			{"patch empty members", "PATCH", "/orgs/default/groups/cluster", `{"members":[]}`, 400, admin.CodeValidation, "members"},
			{"patch empty name", "PATCH", "/orgs/default/groups/cluster", `{"name":""}`, 400, admin.CodeValidation, "name"},
			{"patch unknown group", "PATCH", "/orgs/default/groups/nope", `{"name":"x"}`, 404, admin.CodeNotFound, ""},
			{"provider path is not a group", "GET", "/orgs/default/groups/vllm", ``, 404, admin.CodeNotFound, ""},
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
				if after := e.groupState(); after != before {
					t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
		// The messages say what is wrong.
		errObj := e.fail("POST", "/orgs/default/groups", `{"slug":"g","members":[{"provider":"cluster"}]}`, 400, admin.CodeValidation)
		if !strings.Contains(errObj["message"].(string), "groups cannot contain groups") {
			t.Fatalf("group in group: %v", errObj)
		}
		errObj = e.fail("POST", "/orgs/default/groups", `{"slug":"vllm","members":[{"provider":"vllm"}]}`, 409, admin.CodeSlugTaken)
		if errObj["suggestion"] != "vllm-2" {
			t.Fatalf("suggestion: %v", errObj)
		}
	})
}

// A provider's slug is refused when a group holds it, both ways.
func TestGroupSlugSharedWithProviders(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("vllm")
		e.ok("POST", "/orgs/default/groups", `{"slug":"cluster","members":[{"provider":"vllm"}]}`, 201)
		errObj := e.fail("POST", "/orgs/default/providers", `{"slug":"cluster","kind":"vllm","base_url":"http://h/v1"}`, 409, admin.CodeSlugTaken)
		if errObj["suggestion"] != "cluster-2" {
			t.Fatalf("suggestion: %v", errObj)
		}
		e.fail("PATCH", "/orgs/default/providers/vllm?allow_slug_change=true", `{"slug":"cluster"}`, 409, admin.CodeSlugTaken)
		if c := e.ok("GET", "/orgs/default/slugs/cluster", "", 200); c["available"] != false {
			t.Fatalf("slug check: %v", c)
		}
	})
}

// Soft-deleting a member provider keeps the group and the membership:
// routing (the snapshot) skips the provider, the admin view still lists it,
// and a PATCH that leaves members alone still works.
func TestGroupSurvivesSoftDeletedMember(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("a", "b")
		e.ok("POST", "/orgs/default/groups", `{"slug":"fleet","members":[{"provider":"a"},{"provider":"b","weight":2}]}`, 201)
		e.ok("DELETE", "/orgs/default/providers/b", "", 204)
		g := e.ok("GET", "/orgs/default/groups/fleet", "", 200)
		if !reflect.DeepEqual(groupMembers(t, g), []string{"a:1", "b:2"}) {
			t.Fatalf("group after soft delete: %v", g)
		}
		p := e.ok("PATCH", "/orgs/default/groups/fleet", `{"name":"Fleet"}`, 200)
		if p["name"] != "Fleet" || !reflect.DeepEqual(groupMembers(t, p), []string{"a:1", "b:2"}) {
			t.Fatalf("patch with a soft-deleted member: %v", p)
		}
		e.fail("DELETE", "/orgs/default/providers/b?purge=true", "", 409, admin.CodeInUse)
		e.ok("PATCH", "/orgs/default/groups/fleet", `{"members":[{"provider":"a"}]}`, 200)
		e.ok("DELETE", "/orgs/default/providers/b?purge=true", "", 204)
	})
}
