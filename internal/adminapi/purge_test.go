package adminapi_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// TestGroupSlugReserved: design 000 §3 ("Prefer soft-delete … a freed slug
// is not silently re-pointed") for groups. A deleted group keeps its slug:
// a new claimant gets 409 with a suggestion, the pre-check says "reserved
// (deleted group)" rather than "taken", and the group leaves routing
// (the snapshot) at once.
func TestGroupSlugReserved(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("vllm-a", "vllm-b")
		e.ok("POST", "/orgs/default/groups", `{"slug":"cluster","members":[{"provider":"vllm-a"}]}`, 201)
		if c := e.ok("GET", "/orgs/default/slugs/cluster", "", 200); c["available"] != false || c["state"] != "taken" || c["reason"] != "taken (group)" {
			t.Fatalf("pre-check of a live group's slug: %v", c)
		}
		e.ok("DELETE", "/orgs/default/groups/cluster", "", 204)
		if e.snap.Current().Org("default").Groups.At("cluster") != nil {
			t.Fatal("a deleted group still routes")
		}
		c := e.ok("GET", "/orgs/default/slugs/cluster", "", 200)
		if c["available"] != false || c["state"] != "reserved" || c["reason"] != "reserved (deleted group)" || c["suggestion"] != "cluster-2" {
			t.Fatalf("pre-check of a deleted group's slug: %v", c)
		}
		for _, body := range []string{
			`{"slug":"cluster","members":[{"provider":"vllm-b"}]}`,
			`{"name":"Cluster","members":[{"provider":"vllm-b"}]}`,
		} {
			er := e.fail("POST", "/orgs/default/groups", body, 409, admin.CodeSlugTaken)
			if er["suggestion"] != "cluster-2" || !strings.Contains(er["message"].(string), "reserved (deleted group)") {
				t.Fatalf("new claimant of a reserved slug: %v", er)
			}
		}
		e.fail("POST", "/orgs/default/providers", `{"slug":"cluster","kind":"vllm","base_url":"http://h/v1"}`, 409, admin.CodeSlugTaken)
		// A deleted provider's slug reads the same way.
		e.ok("DELETE", "/orgs/default/providers/vllm-b", "", 204)
		if c := e.ok("GET", "/orgs/default/slugs/vllm-b", "", 200); c["state"] != "reserved" || c["reason"] != "reserved (deleted provider)" {
			t.Fatalf("pre-check of a deleted provider's slug: %v", c)
		}
		e.ok("DELETE", "/orgs/default/groups/cluster?purge=true", "", 204)
		if c := e.ok("GET", "/orgs/default/slugs/cluster", "", 200); c["available"] != true || c["state"] != "available" {
			t.Fatalf("pre-check after the purge: %v", c)
		}
		e.ok("POST", "/orgs/default/groups", `{"slug":"cluster","members":[{"provider":"vllm-a"}]}`, 201)
	})
}

// TestPurgeRefusedByAllowlists: design 000 §3. Purging a provider or a
// group whose slug a key's allowlist names ("slug/*", "slug/model") is
// refused with 409, listing the keys by id, name and project (never a
// secret) and changing nothing; force: true (query or body) purges and
// removes those entries in the same transaction.
func TestPurgeRefusedByAllowlists(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.providers("vllm", "other")
		e.ok("POST", "/orgs/default/groups", `{"slug":"cluster","members":[{"provider":"other"}]}`, 201)
		k := e.ok("POST", "/orgs/default/projects/default/keys", `{"name":"ci","models":["vllm/*","cluster/qwen3","gpt-4o"]}`, 201)
		secret := k["secret"].(string)
		e.ok("DELETE", "/orgs/default/providers/vllm", "", 204)
		before := e.groupState()

		for _, path := range []string{"/orgs/default/providers/vllm?purge=true", "/orgs/default/groups/cluster?purge=true"} {
			status, body := e.do("DELETE", path, "")
			if status != 409 || !strings.Contains(body, `"code":"`+admin.CodeSlugInAllowlist+`"`) || strings.Contains(body, secret) {
				t.Fatalf("DELETE %s: %d %s", path, status, body)
			}
			er := e.fail("DELETE", path, "", 409, admin.CodeSlugInAllowlist)
			keys := er["keys"].([]any)
			if len(keys) != 1 || keys[0].(map[string]any)["name"] != "ci" || keys[0].(map[string]any)["project"] != "default" ||
				!strings.Contains(er["message"].(string), `"ci"`) {
				t.Fatalf("refusal: %v", er)
			}
		}
		if after := e.groupState(); after != before {
			t.Fatalf("a refused purge changed the state:\n%s\n%s", before, after)
		}
		e.fail("DELETE", "/orgs/default/groups/cluster?force=true", "", 400, admin.CodeValidation)

		e.ok("DELETE", "/orgs/default/providers/vllm?purge=true&force=true", "", 204)
		e.ok("DELETE", "/orgs/default/groups/cluster?purge=true", `{"force": true}`, 204)
		got := e.ok("GET", "/orgs/default/projects/default/keys/"+jsonID(k["id"]), "", 200)
		if !reflect.DeepEqual(got["models"], []any{"gpt-4o"}) || got["revoked_at"] != nil {
			t.Fatalf("key after the forced purges: %v", got)
		}
		if c := e.ok("GET", "/orgs/default/slugs/vllm", "", 200); c["available"] != true {
			t.Fatalf("slug after the forced purge: %v", c)
		}
	})
}
