package adminapi_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// seedUsage stores records for the default org's projects "default" and
// "batch" and one record of another org, all one minute apart from base.
func seedUsage(t *testing.T, e *env, base time.Time) {
	t.Helper()
	ctx := context.Background()
	e.ok("POST", "/orgs/default/projects", `{"name":"batch"}`, 201)
	e.ok("POST", "/orgs", `{"name":"acme"}`, 201)
	org, err := e.st.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	acme, err := e.st.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	def, err := e.st.GetProject(ctx, org.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := e.st.GetProject(ctx, org.ID, "batch")
	if err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	recs := []store.UsageRecord{
		{CreatedAt: at(0), OrgID: org.ID, ProjectID: def.ID, KeyID: 1, AddressKind: "route", Address: "team/qwen3",
			Route: "team/qwen3", ProviderID: 4, ProviderSlug: "vllm-a", UpstreamModel: "Qwen/Qwen3-8B", Status: 200,
			Attempts: 2, Latency: 1500 * time.Millisecond, TTFT: 250 * time.Millisecond, PromptTokens: 12,
			CompletionTokens: 34, Stream: true},
		{CreatedAt: at(1), OrgID: org.ID, ProjectID: def.ID, KeyID: 2, AddressKind: "provider", Address: "vllm-a/Qwen/Qwen3-8B",
			ProviderID: 4, ProviderSlug: "vllm-a", UpstreamModel: "Qwen/Qwen3-8B", Status: 429, Class: "rate_limited", Attempts: 3},
		{CreatedAt: at(2), OrgID: org.ID, ProjectID: batch.ID, KeyID: 3, AddressKind: "route", Address: "team/qwen3",
			Route: "team/qwen3", Status: 503, Class: "upstream_unavailable", Attempts: 4},
		{CreatedAt: at(3), OrgID: acme.ID, ProjectID: 999, KeyID: 9, AddressKind: "route", Address: "team/qwen3",
			Route: "team/qwen3", Status: 200, Attempts: 1},
		{CreatedAt: at(4), OrgID: org.ID, ProjectID: batch.ID, KeyID: 3, AddressKind: "route", Address: "embed",
			Route: "embed", Status: 499, Class: "client_cancelled", Attempts: 1},
		// A project id with no project row still lists, without a name.
		{CreatedAt: at(5), OrgID: org.ID, ProjectID: 999, KeyID: 7, AddressKind: "group", Address: "pool/x", Status: 200, Attempts: 1},
	}
	if err := e.st.InsertUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
}

// usageRows lists the usage path and returns the records as a digest
// "project:key:address" per record, in order.
func usageRows(e *env, query string) []string {
	e.t.Helper()
	m := e.ok("GET", "/orgs/default/usage"+query, "", 200)
	var out []string
	for _, d := range m["data"].([]any) {
		u := d.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%v:%s", u["project"], u["key_id"], u["address"]))
	}
	return out
}

func TestUsage(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		base := time.Date(2025, 6, 1, 10, 0, 0, 500_000_000, time.UTC)
		seedUsage(t, e, base)

		m := e.ok("GET", "/orgs/default/usage", "", 200)
		data := m["data"].([]any)
		if len(data) != 5 || m["next_cursor"] != nil {
			t.Fatalf("usage: %v", m)
		}
		first := data[0].(map[string]any)
		want := map[string]any{
			"created_at": "2025-06-01T10:00:00.5Z", "project": "default", "key_id": 1.0,
			"address_kind": "route", "address": "team/qwen3", "route": "team/qwen3", "provider": "vllm-a",
			"upstream_model": "Qwen/Qwen3-8B", "status": 200.0, "class": "", "attempts": 2.0,
			"latency_ms": 1500.0, "ttft_ms": 250.0, "prompt_tokens": 12.0, "completion_tokens": 34.0, "stream": true,
			"tier": 0.0, "fallback": "",
		}
		var keys []string
		for k, v := range first {
			keys = append(keys, k)
			if k != "id" && want[k] != v {
				t.Errorf("%s = %v, want %v", k, v, want[k])
			}
		}
		slices.Sort(keys)
		if got := strings.Join(keys, ","); got != "address,address_kind,attempts,class,completion_tokens,cost,created_at,fallback,id,key_id,"+
			"latency_ms,project,prompt_tokens,provider,route,status,stream,tier,ttft_ms,upstream_model" {
			t.Fatalf("fields: %s", got)
		}
		last := data[4].(map[string]any)
		if last["project"] != "" || last["route"] != "" || last["address_kind"] != "group" || last["provider"] != "" {
			t.Fatalf("record of a missing project: %v", last)
		}

		for _, c := range []struct{ query, want string }{
			{"", "default:1:team/qwen3,default:2:vllm-a/Qwen/Qwen3-8B,batch:3:team/qwen3,batch:3:embed,:7:pool/x"},
			{"?project=batch", "batch:3:team/qwen3,batch:3:embed"},
			{"?key=2", "default:2:vllm-a/Qwen/Qwen3-8B"},
			{"?key=9", ""}, // another org's key
			{"?route=" + url.QueryEscape("team/qwen3"), "default:1:team/qwen3,batch:3:team/qwen3"},
			{"?since=2025-06-01T10:02:00.5Z", "batch:3:team/qwen3,batch:3:embed,:7:pool/x"},
			// Inclusive, and in any offset.
			{"?since=" + url.QueryEscape("2025-06-01T13:01:00.5+03:00"), "default:2:vllm-a/Qwen/Qwen3-8B,batch:3:team/qwen3,batch:3:embed,:7:pool/x"},
			{"?since=2025-06-01T10:01:00.500001Z", "batch:3:team/qwen3,batch:3:embed,:7:pool/x"},
			{"?project=batch&key=3&route=embed&since=2025-06-01T10:00:00Z", "batch:3:embed"},
			{"?project=default&route=embed", ""},
		} {
			if got := strings.Join(usageRows(e, c.query), ","); got != c.want {
				t.Errorf("%s: got %s, want %s", c.query, got, c.want)
			}
		}

		// Pagination, with filters kept across pages.
		var all []string
		cursor := ""
		for range 10 {
			m := e.ok("GET", "/orgs/default/usage?limit=2&route=team%2Fqwen3"+cursor, "", 200)
			for _, d := range m["data"].([]any) {
				all = append(all, fmt.Sprint(d.(map[string]any)["key_id"]))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + next
		}
		if strings.Join(all, ",") != "1,3" {
			t.Fatalf("paged: %v", all)
		}
		all, cursor = nil, ""
		for range 10 {
			m := e.ok("GET", "/orgs/default/usage?limit=2"+cursor, "", 200)
			for _, d := range m["data"].([]any) {
				all = append(all, fmt.Sprint(d.(map[string]any)["key_id"]))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + next
		}
		if strings.Join(all, ",") != "1,2,3,3,7" {
			t.Fatalf("paged: %v", all)
		}

		// The other org sees only its own record.
		m = e.ok("GET", "/orgs/acme/usage", "", 200)
		if d := m["data"].([]any); len(d) != 1 || d[0].(map[string]any)["key_id"] != 9.0 {
			t.Fatalf("acme usage: %v", m)
		}
	})
}

func TestUsageBadFilters(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			query  string
			fields []string
		}{
			{"?key=" + strings.Repeat("k", 201), []string{"key"}},
			{"?key=0", []string{"key"}},
			{"?key=-3", []string{"key"}},
			{"?key=", []string{"key"}},
			{"?key=1&key=2", []string{"key"}},
			{"?since=yesterday", []string{"since"}},
			{"?since=2025-06-01T00:00", []string{"since"}},
			{"?since=2025-06-02&until=2025-06-01", []string{"until"}},
			{"?route=", []string{"route"}},
			{"?route=a%20b", []string{"route"}},
			{"?project=", []string{"project"}},
			{"?project=no%20such!", []string{"project"}},
			{"?projcet=default", []string{"projcet"}},
			{"?limit=0&key=0&since=now", []string{"key", "limit", "since"}},
			{"?cursor=zz", []string{"cursor"}},
		} {
			errObj := e.fail("GET", "/orgs/default/usage"+c.query, "", 400, admin.CodeValidation)
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
		e.fail("GET", "/orgs/default/usage?project=nope", "", 404, admin.CodeNotFound)
		e.fail("GET", "/orgs/nope/usage", "", 404, admin.CodeNotFound)
		e.fail("POST", "/orgs/default/usage", "{}", 405, admin.CodeMethodNotAllowed)
		// An org without usage lists nothing, not an error.
		if m := e.ok("GET", "/orgs/default/usage", "", 200); len(m["data"].([]any)) != 0 {
			t.Fatalf("empty usage: %v", m)
		}
	})
}
