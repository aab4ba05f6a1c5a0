package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
)

// Issue 14 §3 and §4 against a running rolter, configured through the admin
// API: route "strict" denies tools and so does its provider p; tools are
// refused on "strict", "p/real" and "group/real", and served on a route
// over an allow-all provider. /v1/models shows each governing policy. A
// stale target fails over, and the admin route view says why it is out.
func TestPolicyEverywhereEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if r.URL.Path == "/v1/models" || r.URL.Path == "/health" {
				_, _ = io.WriteString(w, `{"data":[{"id":"real"}]}`)
				return
			}
			if strings.Contains(string(b), `"gone"`) {
				w.WriteHeader(404)
				_, _ = io.WriteString(w, `{"error":{"message":"The model `+"`gone`"+` does not exist or you do not have access to it.","code":"model_not_found"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"model":"x","choices":[]}`)
		}))
		defer up.Close()
		spec, dir := storetest.Spec(t, d)
		run := start(t, server.Config{Store: spec, DataDir: dir})
		defer run.srv.Shutdown()
		token := adminRe.FindStringSubmatch(run.out.String())[1]
		key := keyRe.FindStringSubmatch(run.out.String())[1]
		admin := func(method, path, body string, want int) string {
			t.Helper()
			code, out := run.call(t, method, "/admin/v1/orgs/default"+path, token, body)
			if code != want {
				t.Fatalf("%s %s: %d %s", method, path, code, out)
			}
			return out
		}
		base := up.URL + "/v1"
		admin("POST", "/providers", `{"slug":"p","kind":"vllm","base_url":"`+base+`","policy":{"tools":"deny","max_output_tokens":300}}`, 201)
		admin("POST", "/providers", `{"slug":"open","kind":"vllm","base_url":"`+base+`"}`, 201)
		admin("POST", "/groups", `{"slug":"group","members":[{"provider":"p"}]}`, 201)
		admin("POST", "/projects/default/routes", `{"model":"strict","targets":[{"provider":"p","upstream_model":"real"}],"policy":{"tools":"deny"}}`, 201)
		admin("POST", "/projects/default/routes", `{"model":"free","targets":[{"provider":"open","upstream_model":"real"}]}`, 201)
		admin("POST", "/projects/default/routes", `{"model":"pool","targets":[{"provider":"p","upstream_model":"gone","weight":1000},{"provider":"open","upstream_model":"real"}]}`, 201)

		chat := func(model, extra string) (int, string) {
			t.Helper()
			return run.call(t, "POST", "/v1/chat/completions", key, `{"model":"`+model+`"`+extra+`,"messages":[]}`)
		}
		tools := `,"tools":[{"type":"function","function":{"name":"f"}}]`
		for _, model := range []string{"strict", "p/real", "group/real"} {
			if code, body := chat(model, tools); code != 400 || !strings.Contains(body, "tools_denied") {
				t.Fatalf("%s with tools: %d %s", model, code, body)
			}
		}
		if code, body := chat("free", tools); code != 200 {
			t.Fatalf("free with tools: %d %s", code, body)
		}
		_, list := run.call(t, "GET", "/v1/models", key, "")
		var models struct {
			Data []struct {
				ID     string         `json:"id"`
				Policy map[string]any `json:"policy"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(list), &models); err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, m := range models.Data {
			seen[m.ID] = fmt.Sprint(m.Policy)
		}
		if seen["strict"] != "map[max_output_tokens:300 tools:deny]" || seen["free"] != "map[]" {
			t.Fatalf("/v1/models policies: %v", seen)
		}

		// The stale target: the request is served by the other, and the
		// admin view says why p's target is out.
		if code, body := chat("pool", ""); code != 200 {
			t.Fatalf("pool with a stale target: %d %s", code, body)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			view := admin("GET", "/projects/default/routes/pool", "", 200)
			if strings.Contains(view, `"routable":false`) && strings.Contains(view, "stale") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("route view never showed the stale target: %s", view)
			}
			time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
		}
	})
}
