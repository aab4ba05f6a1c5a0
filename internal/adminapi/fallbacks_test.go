package adminapi_test

import (
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/admin"
)

// Issue 19: target priorities, route fallbacks and context fallbacks are
// written, shown and validated by the admin API: a fallback names another
// route of the project, a cycle or a chain deeper than 3 is a 400 with a
// stable code, and a route named as a fallback cannot be deleted or
// renamed. A refused write changes nothing.
func TestRouteFallbacks(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		e.ok("POST", "/orgs/default/providers", `{"slug":"p","kind":"vllm","base_url":"http://10.0.0.5:8000/v1"}`, 201)
		routes := "/orgs/default/projects/default/routes"
		for _, m := range []string{"d", "c", "b"} {
			e.ok("POST", routes, `{"model":"`+m+`","targets":[{"provider":"p"}]}`, 201)
		}
		a := e.ok("POST", routes, `{"model":"a","fallbacks":["b","c"],"context_fallback":"d",
			"targets":[{"provider":"p"},{"provider":"p","upstream_model":"x","priority":1}]}`, 201)
		if !reflect.DeepEqual(a["fallbacks"], []any{"b", "c"}) || a["context_fallback"] != "d" {
			t.Fatalf("created route: %v", a)
		}
		tgs := a["targets"].([]any)
		if tgs[0].(map[string]any)["priority"] != float64(0) || tgs[1].(map[string]any)["priority"] != float64(1) {
			t.Fatalf("priorities: %v", tgs)
		}
		if b := e.ok("GET", routes+"/b", "", 200); !reflect.DeepEqual(b["fallbacks"], []any{}) {
			t.Fatalf("a route without fallbacks shows %v", b["fallbacks"])
		}

		e.fail("PATCH", routes+"/a", `{"fallbacks":["a"]}`, 400, admin.CodeFallbackCycle)
		e.fail("PATCH", routes+"/b", `{"fallbacks":["a"]}`, 400, admin.CodeFallbackCycle)
		e.fail("PATCH", routes+"/d", `{"context_fallback":"a"}`, 400, admin.CodeFallbackCycle)
		e.fail("PATCH", routes+"/a", `{"fallbacks":["nope"]}`, 400, admin.CodeUnknownRoute)
		e.fail("PATCH", routes+"/a", `{"fallbacks":["b","b"]}`, 400, admin.CodeValidation)
		e.fail("PATCH", routes+"/a", `{"targets":[{"provider":"p","priority":-1}]}`, 400, admin.CodeValidation)
		e.fail("POST", routes, `{"model":"e","fallbacks":["e"],"targets":[{"provider":"p"}]}`, 400, admin.CodeFallbackCycle)
		e.fail("GET", routes+"/e", "", 404, admin.CodeNotFound)

		// a -> b -> c -> d is 3 deep: allowed; one more is refused,
		// whichever end it is added at.
		e.ok("PATCH", routes+"/b", `{"fallbacks":["c"]}`, 200)
		e.ok("PATCH", routes+"/c", `{"fallbacks":["d"]}`, 200)
		e.ok("POST", routes, `{"model":"z","targets":[{"provider":"p"}]}`, 201)
		e.fail("PATCH", routes+"/d", `{"fallbacks":["z"]}`, 400, admin.CodeFallbackTooDeep)
		e.fail("PATCH", routes+"/z", `{"fallbacks":["a"]}`, 400, admin.CodeFallbackTooDeep)
		if d := e.ok("GET", routes+"/d", "", 200); !reflect.DeepEqual(d["fallbacks"], []any{}) {
			t.Fatalf("a refused patch changed fallbacks: %v", d["fallbacks"])
		}

		e.fail("DELETE", routes+"/d", "", 409, admin.CodeRouteIsFallback)
		e.fail("PATCH", routes+"/c", `{"model":"c2"}`, 409, admin.CodeRouteIsFallback)
		e.ok("GET", routes+"/c", "", 200)
		e.ok("PATCH", routes+"/a", `{"fallbacks":[],"context_fallback":""}`, 200)
		e.ok("PATCH", routes+"/b", `{"fallbacks":[]}`, 200)
		e.ok("PATCH", routes+"/c", `{"model":"c2"}`, 200)
		e.fail("DELETE", routes+"/d", "", 409, admin.CodeRouteIsFallback) // c2 still names it
		e.ok("PATCH", routes+"/c2", `{"fallbacks":[]}`, 200)
		e.do("DELETE", routes+"/d", "")
		e.fail("GET", routes+"/d", "", 404, admin.CodeNotFound)
	})
}
