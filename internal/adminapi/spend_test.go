package adminapi_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestPricesAndBudgets: prices on providers and targets and budgets on
// keys and projects are stored exactly, shown, patched and cleared; bad
// values are 400s that name the field and change nothing.
func TestPricesAndBudgets(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		p := e.ok("POST", "/orgs/default/providers", `{"name":"p","kind":"openai","base_url":"http://10.0.0.1/v1",
			"prices":{"input":0.15,"output":"0.6"}}`, 201)
		if b, _ := json.Marshal(p["prices"]); string(b) != `{"input":0.15,"output":0.6}` {
			t.Fatalf("provider prices = %s", b)
		}
		r := e.ok("POST", "/orgs/default/projects/default/routes", `{"model":"m","targets":[
			{"provider":"p"},{"provider":"p","upstream_model":"big","prices":{"input":3,"output":15}}]}`, 201)
		tg := r["targets"].([]any)
		if _, has := tg[0].(map[string]any)["prices"]; has {
			t.Fatalf("a target without an override shows prices: %v", tg[0])
		}
		if b, _ := json.Marshal(tg[1].(map[string]any)["prices"]); string(b) != `{"input":3,"output":15}` {
			t.Fatalf("target prices = %s", b)
		}
		// A PATCH that keeps the targets keeps their prices.
		r = e.ok("PATCH", "/orgs/default/projects/default/routes/m", `{"strategy":"weighted"}`, 200)
		if b, _ := json.Marshal(r["targets"].([]any)[1].(map[string]any)["prices"]); string(b) != `{"input":3,"output":15}` {
			t.Fatalf("target prices after a patch = %s", b)
		}
		p = e.ok("PATCH", "/orgs/default/providers/p", `{"prices":{"input":"0.000001","output":0}}`, 200)
		if b, _ := json.Marshal(p["prices"]); string(b) != `{"input":0.000001,"output":0}` {
			t.Fatalf("patched prices = %s", b)
		}
		p = e.ok("PATCH", "/orgs/default/providers/p", `{"prices":null}`, 200)
		if _, has := p["prices"]; has {
			t.Fatalf("null did not clear the prices: %v", p)
		}

		k := e.ok("POST", "/orgs/default/projects/default/keys", `{"name":"alice","budget":{"amount":"10.5","period":"month"}}`, 201)
		if b, _ := json.Marshal(k["budget"]); string(b) != `{"amount":10.5,"period":"month"}` {
			t.Fatalf("key budget = %s", b)
		}
		pj := e.ok("POST", "/orgs/default/projects", `{"name":"web","budget":{"amount":100,"period":"week"}}`, 201)
		if b, _ := json.Marshal(pj["budget"]); string(b) != `{"amount":100,"period":"week"}` {
			t.Fatalf("project budget = %s", b)
		}
		pj = e.ok("PATCH", "/orgs/default/projects/web", `{"budget":{"amount":0.25,"period":"day"}}`, 200)
		if b, _ := json.Marshal(pj["budget"]); string(b) != `{"amount":0.25,"period":"day"}` {
			t.Fatalf("patched project budget = %s", b)
		}
		pj = e.ok("PATCH", "/orgs/default/projects/web", `{"description":"x"}`, 200)
		if pj["budget"] == nil {
			t.Fatal("a patch without budget removed it")
		}
		pj = e.ok("PATCH", "/orgs/default/projects/web", `{"budget":null}`, 200)
		if _, has := pj["budget"]; has {
			t.Fatalf("null did not remove the budget: %v", pj)
		}

		before := e.state()
		for _, c := range []struct{ method, path, body, field string }{
			{"POST", "/orgs/default/providers", `{"name":"q","kind":"openai","base_url":"http://10.0.0.1/v1","prices":{"input":-1,"output":1}}`, "prices.input"},
			{"POST", "/orgs/default/providers", `{"name":"q","kind":"openai","base_url":"http://10.0.0.1/v1","prices":{"input":1}}`, "prices.output"},
			{"POST", "/orgs/default/providers", `{"name":"q","kind":"openai","base_url":"http://10.0.0.1/v1","prices":{"input":"0.0000001","output":1}}`, "prices.input"},
			{"POST", "/orgs/default/providers", `{"name":"q","kind":"openai","base_url":"http://10.0.0.1/v1","prices":{"input":1e3,"output":1}}`, "prices.input"},
			{"PATCH", "/orgs/default/providers/p", `{"prices":{"input":1,"output":"x"}}`, "prices.output"},
			{"POST", "/orgs/default/projects/default/routes", `{"model":"n","targets":[{"provider":"p","prices":{"input":1,"output":99999}}]}`, "targets[0].prices.output"},
			{"POST", "/orgs/default/projects/default/keys", `{"name":"b","budget":{"amount":5,"period":"year"}}`, "budget.period"},
			{"POST", "/orgs/default/projects/default/keys", `{"name":"b","budget":{"period":"day"}}`, "budget.amount"},
			{"POST", "/orgs/default/projects", `{"name":"x","budget":{"amount":-5,"period":"day"}}`, "budget.amount"},
			{"PATCH", "/orgs/default/projects/web", `{"budget":{"amount":1,"period":"hour"}}`, "budget.period"},
		} {
			errObj := e.fail(c.method, c.path, c.body, 400, "validation_failed")
			fields, _ := errObj["fields"].(map[string]any)
			if _, ok := fields[c.field]; !ok {
				t.Errorf("%s %s: fields %v, want %s", c.method, c.body, fields, c.field)
			}
		}
		e.fail("POST", "/orgs/default/projects/default/keys", `{"name":"b","budget":{"amount":5,"period":"day","x":1}}`, 400, "unknown_field")
		e.fail("PATCH", "/orgs/default/projects/web", `{"budget":{"amount":1,"period":"day","cap":2}}`, 400, "unknown_field")
		if after := e.state(); after != before {
			t.Fatalf("refused writes changed the state:\n%s\n%s", before, after)
		}
	})
}

// TestUsageSummaryParams: malformed summary parameters are 400s naming
// them.
func TestUsageSummaryParams(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			query  string
			fields []string
		}{
			{"?group_by=week", []string{"group_by"}},
			{"?group_by=day,hour", []string{"group_by"}},
			{"?group_by=key,key", []string{"group_by"}},
			{"?format=xml", []string{"format"}},
			{"?limit=0", []string{"limit"}},
			{"?limit=10001", []string{"limit"}},
			{"?cursor=abc", []string{"cursor"}},
			{"?until=soon&model=", []string{"model", "until"}},
		} {
			errObj := e.fail("GET", "/orgs/default/usage/summary"+c.query, "", 400, "validation_failed")
			fields, _ := errObj["fields"].(map[string]any)
			var got []string
			for f := range fields {
				got = append(got, f)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.fields) {
				t.Errorf("%s: fields %v, want %v", c.query, got, c.fields)
			}
		}
		m := e.ok("GET", "/orgs/default/usage/summary?group_by=key,day", "", 200)
		if b, _ := json.Marshal(m); !strings.Contains(string(b), `"data":[]`) || m["currency"] != "USD" {
			t.Fatalf("empty summary: %s", b)
		}
	})
}
