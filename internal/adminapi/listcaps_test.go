package adminapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// The lists a caller chooses are bounded: a provider's models, key pool,
// a group's members and their model_map, a route's targets. Past the
// bound the write is refused naming the list and changes nothing, and a
// refusal names at most 100 fields however many items are bad.
func TestCallerChosenListsAreBounded(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		list := func(n int, item func(i int) string) string {
			parts := make([]string, n)
			for i := range parts {
				parts[i] = item(i)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		quoted := func(i int) string { return fmt.Sprintf("%q", fmt.Sprint("m-", i)) }
		before := e.state()
		for _, c := range []struct{ name, path, body, field string }{
			{"models", "/orgs/default/providers",
				`{"name":"p","kind":"vllm","base_url":"http://10.0.0.5/v1","models":` + list(admin.MaxListItems+1, quoted) + `}`, "models"},
			{"key pool", "/orgs/default/providers",
				`{"name":"p","kind":"vllm","base_url":"http://10.0.0.5/v1","keys":` + list(admin.MaxTargets+1, func(i int) string { return fmt.Sprintf(`{"secret":"sk-%d"}`, i) }) + `}`, "keys"},
		} {
			errObj := e.fail("POST", c.path, c.body, 400, admin.CodeValidation)
			if _, ok := errObj["fields"].(map[string]any)[c.field]; !ok {
				t.Fatalf("%s: the refusal does not name %q: %v", c.name, c.field, errObj["fields"])
			}
		}
		if after := e.state(); after != before {
			t.Fatalf("refused writes changed the state:\n%s\n%s", before, after)
		}
		e.ok("POST", "/orgs/default/providers", `{"name":"up","kind":"vllm","base_url":"http://10.0.0.5/v1"}`, 201)
		before = e.state()
		member := func(int) string { return `{"provider":"up"}` }
		mm := map[string]string{}
		for i := range admin.MaxListItems + 1 {
			mm[fmt.Sprint("a-", i)] = "b"
		}
		mmJSON, _ := json.Marshal(mm)
		for _, c := range []struct{ name, path, body, field string }{
			{"members", "/orgs/default/groups", `{"name":"g","members":` + list(admin.MaxTargets+1, member) + `}`, "members"},
			{"model_map", "/orgs/default/groups", `{"name":"g","members":[{"provider":"up","model_map":` + string(mmJSON) + `}]}`, "members[0].model_map"},
			{"targets", "/orgs/default/projects/default/routes",
				`{"model":"r","targets":` + list(admin.MaxTargets+1, func(int) string { return `{"provider":"up"}` }) + `}`, "targets"},
		} {
			errObj := e.fail("POST", c.path, c.body, 400, admin.CodeValidation)
			if _, ok := errObj["fields"].(map[string]any)[c.field]; !ok {
				t.Fatalf("%s: the refusal does not name %q: %v", c.name, c.field, errObj["fields"])
			}
		}
		// 1,000 bad model names (within the bound): at most 100 named.
		errObj := e.fail("POST", "/orgs/default/providers",
			`{"name":"q","kind":"vllm","base_url":"http://10.0.0.5/v1","models":`+list(admin.MaxListItems, func(int) string { return `" "` })+`}`,
			400, admin.CodeValidation)
		if n := len(errObj["fields"].(map[string]any)); n > 100 {
			t.Fatalf("the refusal names %d fields, want at most 100", n)
		}
		if after := e.state(); after != before {
			t.Fatalf("refused writes changed the state:\n%s\n%s", before, after)
		}
	})
}
