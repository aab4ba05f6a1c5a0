package server_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
)

const spendAdmin = "spend-test-admin-token-FAKE-000001"

// tokenUpstream answers every chat completion with 1,000 prompt and 500
// completion tokens.
func tokenUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500}}`)
	}))
	t.Cleanup(up.Close)
	return up
}

func (r *run) admin(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	code, out := r.call(t, method, "/admin/v1/orgs/default"+path, spendAdmin, body)
	if code != want {
		t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	m := map[string]any{}
	_ = json.Unmarshal([]byte(out), &m)
	return m
}

// chat sends one chat completion as key and returns the response.
func (r *run) chat(t *testing.T, key, model string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+r.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// spendUntilRefused sends requests as key until one is refused with 429,
// and returns how many succeeded before it and the refusal.
func (r *run) spendUntilRefused(t *testing.T, key, model string) (int, *http.Response, string) {
	t.Helper()
	for ok := 0; ok < 20; ok++ {
		resp, body := r.chat(t, key, model)
		switch resp.StatusCode {
		case 200:
		case 429:
			return ok, resp, body
		default:
			t.Fatalf("request %d: %d %s", ok+1, resp.StatusCode, body)
		}
	}
	t.Fatalf("20 requests served; the budget was never enforced")
	return 0, nil, ""
}

// checkRefusal asserts a 429 budget_exceeded naming the scope and the
// reset time, in the message, Retry-After and x-rolter-budget-reset.
func checkRefusal(t *testing.T, resp *http.Response, body, scope string, reset time.Time) {
	t.Helper()
	var e struct {
		Error struct{ Code, Type, Message string }
	}
	_ = json.Unmarshal([]byte(body), &e)
	want := reset.Format(time.RFC3339)
	if e.Error.Code != "budget_exceeded" || e.Error.Type != "rate_limit_error" ||
		!strings.Contains(e.Error.Message, scope) || !strings.Contains(e.Error.Message, want) {
		t.Fatalf("refusal %s, want budget_exceeded naming %s and %s", body, scope, want)
	}
	if got := resp.Header.Get("X-Rolter-Budget-Reset"); got != want {
		t.Fatalf("x-rolter-budget-reset = %q, want %q", got, want)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if lag := time.Until(reset) - time.Duration(ra)*time.Second; err != nil || ra < 1 || lag > time.Minute || lag < -time.Minute {
		t.Fatalf("Retry-After %q does not point at %s", resp.Header.Get("Retry-After"), want)
	}
}

// TestBudgetsEndToEnd: a key's and a project's budget refuse requests
// once spent, with the reset time; spend survives a restart; the usage
// API reports tokens and cost, and unpriced tokens as unpriced. Both
// stores.
func TestBudgetsEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		spec, dir := storetest.Spec(t, d)
		cfg := server.Config{Store: spec, DataDir: dir, AdminToken: secret.New(spendAdmin)}
		up := tokenUpstream(t)
		r := start(t, cfg)
		// $1 per million input and $2 per million output tokens: each
		// request costs 1000*1 + 500*2 = $0.002.
		r.admin(t, "POST", "/providers", `{"name":"paid","kind":"vllm","base_url":"`+up.URL+`/v1","prices":{"input":1,"output":2}}`, 201)
		r.admin(t, "POST", "/providers", `{"name":"free","kind":"vllm","base_url":"`+up.URL+`/v1"}`, 201)
		for _, pj := range []string{"default", "team"} {
			if pj == "team" {
				r.admin(t, "POST", "/projects", `{"name":"team","budget":{"amount":"0.001","period":"month"}}`, 201)
			}
			r.admin(t, "POST", "/projects/"+pj+"/routes", `{"model":"paid","targets":[{"provider":"paid"}]}`, 201)
		}
		r.admin(t, "POST", "/projects/default/routes", `{"model":"unpriced","targets":[{"provider":"free"}]}`, 201)
		// The target's own price overrides the provider's: 1500 * $10/M.
		r.admin(t, "POST", "/projects/default/routes", `{"model":"override","targets":[{"provider":"paid","prices":{"input":10,"output":10}}]}`, 201)
		alice := r.admin(t, "POST", "/projects/default/keys", `{"name":"alice","budget":{"amount":0.003,"period":"day"}}`, 201)["secret"].(string)
		bob := r.admin(t, "POST", "/projects/team/keys", `{"name":"bob"}`, 201)["secret"].(string)
		carol := r.admin(t, "POST", "/projects/default/keys", `{"name":"carol"}`, 201)["secret"].(string)

		now := time.Now().UTC()
		tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		nextMonth := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)

		// alice: $0.003 a day; two requests spend $0.004.
		ok, resp, body := r.spendUntilRefused(t, alice, "paid")
		t.Logf("alice: %d requests served before the refusal", ok)
		if ok < 2 || ok > 4 {
			t.Fatalf("alice was refused after %d requests; her budget covers 2 (a third may be in flight)", ok)
		}
		checkRefusal(t, resp, body, `key "alice"`, tomorrow)

		// bob: his project's $0.001 a month is spent by one request.
		ok, resp, body = r.spendUntilRefused(t, bob, "paid")
		if ok < 1 || ok > 3 {
			t.Fatalf("bob was refused after %d requests", ok)
		}
		checkRefusal(t, resp, body, `project "team"`, nextMonth)

		// carol has no budget: priced, unpriced and overridden requests.
		for _, m := range []string{"paid", "unpriced", "unpriced", "override"} {
			if resp, body := r.chat(t, carol, m); resp.StatusCode != 200 {
				t.Fatalf("carol on %s: %d %s", m, resp.StatusCode, body)
			}
		}
		if err := r.srv.Shutdown(); err != nil {
			t.Fatal(err)
		}

		// A restart on the same store: alice's spend is still there.
		r = start(t, cfg)
		defer r.srv.Shutdown()
		resp, body = r.chat(t, alice, "paid")
		if resp.StatusCode != 429 {
			t.Fatalf("after a restart alice got %d %s", resp.StatusCode, body)
		}
		checkRefusal(t, resp, body, `key "alice"`, tomorrow)

		// "How many tokens did alice use today on model paid, and what
		// did they cost": one call.
		day := now.Format(time.DateOnly)
		sum := r.admin(t, "GET", "/usage/summary?key=alice&model=paid&since="+day+"&until="+tomorrow.Format(time.DateOnly), "", 200)
		rows := sum["data"].([]any)
		if len(rows) != 1 {
			t.Fatalf("summary: %v", sum)
		}
		row := rows[0].(map[string]any)
		served := row["prompt_tokens"].(float64) / 1000
		if served < 2 || row["completion_tokens"].(float64) != served*500 || row["unpriced_requests"].(float64) != 0 {
			t.Fatalf("alice's summary: %v", row)
		}
		if c := row["cost"].(float64); fmt.Sprint(c) != fmt.Sprint(served*0.002) {
			t.Fatalf("alice's cost = %v for %v served requests", c, served)
		}

		// carol by model: unpriced tokens are counted, not priced.
		sum = r.admin(t, "GET", "/usage/summary?key=carol&group_by=key,model", "", 200)
		got := map[string]string{}
		for _, x := range sum["data"].([]any) {
			m := x.(map[string]any)
			b, _ := json.Marshal(map[string]any{"n": m["requests"], "pt": m["prompt_tokens"], "cost": m["cost"], "unpriced": m["unpriced_requests"], "key": m["key"]})
			got[m["model"].(string)] = string(b)
		}
		want := map[string]string{
			"paid":     `{"cost":0.002,"key":"carol","n":1,"pt":1000,"unpriced":0}`,
			"override": `{"cost":0.015,"key":"carol","n":1,"pt":1000,"unpriced":0}`,
			"unpriced": `{"cost":null,"key":"carol","n":2,"pt":2000,"unpriced":2}`,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("carol by model:\n got %v\nwant %v", got, want)
		}

		// CSV, grouped by project and day.
		code, csvBody := r.call(t, "GET", "/admin/v1/orgs/default/usage/summary?group_by=project,day&provider=paid&format=csv", spendAdmin, "")
		recs, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
		if code != 200 || err != nil || len(recs) != 3 ||
			strings.Join(recs[0], ",") != "project,day,requests,prompt_tokens,completion_tokens,cost_usd,unpriced_requests" {
			t.Fatalf("csv: %d %v\n%s", code, err, csvBody)
		}
		for _, rec := range recs[1:] {
			if rec[1] != day+"T00:00:00Z" || (rec[0] != "default" && rec[0] != "team") || rec[5] == "" {
				t.Fatalf("csv row %v", rec)
			}
		}
		// Bounded: more groups than the limit is refused, not cut.
		code, out := r.call(t, "GET", "/admin/v1/orgs/default/usage/summary?group_by=key,model&limit=2", spendAdmin, "")
		if code != 400 || !strings.Contains(out, `"too_many_groups"`) {
			t.Fatalf("over the limit: %d %s", code, out)
		}
		// The record list shows each record's cost, null when unpriced.
		lst := r.admin(t, "GET", "/usage?key=carol&model=unpriced", "", 200)
		for _, x := range lst["data"].([]any) {
			if c, has := x.(map[string]any)["cost"]; !has || c != nil {
				t.Fatalf("unpriced record: %v", x)
			}
		}
	})
}
