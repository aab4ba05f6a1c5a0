package adminapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store/storetest"
)

func hostsBody(n int) string {
	recipe := `{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18}}`
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"ip":"10.2.%d.%d","port":8000,"model_name":"qwen3","recipe":%s}`, i/250, i%250+1, recipe)
	}
	return `{"hosts":[` + strings.Join(items, ",") + `]}`
}

// POST /hosts takes {"hosts": [...]}: 201 with the views in order, each
// with its key; a bad entry is a 400 naming it, nothing written; more
// than MaxHostsPerCreate is 400 too_many_entries before decoding.
func TestCreateHostsList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newEnv(t, d, nil)
		code, out := e.do("POST", "/orgs/default/hosts", hostsBody(3))
		if code != 201 {
			t.Fatalf("list create: %d %s", code, out)
		}
		var res struct {
			Hosts []struct {
				IP     string `json:"ip"`
				APIKey string `json:"api_key"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Hosts) != 3 || res.Hosts[2].IP != "10.2.0.3" || res.Hosts[0].APIKey == "" {
			t.Fatalf("answer: %s (%v)", out, err)
		}

		bad := strings.Replace(hostsBody(3), `"ip":"10.2.0.2","port":8000`, `"ip":"10.2.0.2","port":0`, 1)
		bad = strings.ReplaceAll(bad, `"10.2.0.`, `"10.3.0.`)
		code, out = e.do("POST", "/orgs/default/hosts", bad)
		if code != 400 || !strings.Contains(out, `"hosts[1].port"`) || !strings.Contains(out, admin.CodeValidation) {
			t.Fatalf("bad entry: %d %s", code, out)
		}
		over := hostsBody(admin.MaxHostsPerCreate + 1)
		code, out = e.do("POST", "/orgs/default/hosts", over)
		if code != 400 || !strings.Contains(out, admin.CodeTooManyEntries) {
			t.Fatalf("over the cap: %d %s", code, out)
		}
		// The handler counts the entries before decoding them: entries
		// that are no hosts at all (which the decoder would refuse as
		// validation_failed) are refused for their number, in the words
		// of the count that stops at the first entry over the cap (the
		// Service's own check names the exact number).
		ones := `{"hosts":[` + strings.Repeat("1,", admin.MaxHostsPerCreate) + `1]}`
		code, out = e.do("POST", "/orgs/default/hosts", ones)
		if code != 400 || !strings.Contains(out, admin.CodeTooManyEntries) || !strings.Contains(out, fmt.Sprintf("lists more than %d hosts", admin.MaxHostsPerCreate)) {
			t.Fatalf("over the cap, undecodable entries: %d %s", code, out)
		}
		// An unknown field inside an entry is refused as the one-host
		// form refuses it.
		code, out = e.do("POST", "/orgs/default/hosts", `{"hosts":[{"ip":"10.4.0.1","bogus":1}]}`)
		if code != 400 || !strings.Contains(out, admin.CodeUnknownField) {
			t.Fatalf("unknown field: %d %s", code, out)
		}
		var list struct {
			Data []any `json:"data"`
		}
		_, out = e.do("GET", "/orgs/default/hosts", "")
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Data) != 3 {
			t.Fatalf("hosts after refusals: %s", out)
		}
		// The one-host form is unchanged.
		one := `{"ip":"10.5.0.1","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18}}}`
		if h := e.ok("POST", "/orgs/default/hosts", one, 201); h["api_key"] == nil || h["ip"] != "10.5.0.1" {
			t.Fatalf("one host: %v", h)
		}
	})
}

// The list form's body is bounded per host, not by the one-host form's
// 1 MiB: MaxHostsPerCreate hosts, each with 4,096 bytes of notes written
// as \u escapes (about 12.5 MB), are created; a body over the list bound
// is 413 body_too_large naming it, and the one-host form keeps 1 MiB.
func TestCreateHostsListBodyBounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newEnv(t, d, nil)
		notes := strings.Repeat(`\u00e9`, 2048) // é, 2 bytes in UTF-8: 4,096 bytes stored
		body := strings.ReplaceAll(hostsBody(admin.MaxHostsPerCreate), `,"recipe":`, `,"notes":"`+notes+`","recipe":`)
		if len(body) < 12_000_000 {
			t.Fatalf("the body is %d bytes; the test wants one far over 1 MiB", len(body))
		}
		code, out := e.do("POST", "/orgs/default/hosts", body)
		if code != 201 {
			t.Fatalf("%d hosts with full notes (%d bytes): %d %.300s", admin.MaxHostsPerCreate, len(body), code, out)
		}
		var res struct {
			Hosts []struct {
				Notes string `json:"notes"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Hosts) != admin.MaxHostsPerCreate || len(res.Hosts[999].Notes) != 4096 {
			t.Fatalf("answer: %v, %d hosts", err, len(res.Hosts))
		}

		// Over the list bound: refused before anything is decoded.
		const listBound = admin.MaxHostsPerCreate * 16 << 10
		huge := `{"hosts":[{"ip":"10.9.0.1","port":8000,"notes":"` + strings.Repeat("x", listBound) + `"}]}`
		code, out = e.do("POST", "/orgs/default/hosts", huge)
		if code != 413 || !strings.Contains(out, admin.CodeBodyTooLarge) || !strings.Contains(out, fmt.Sprint(listBound)) {
			t.Fatalf("over the list bound: %d %.300s", code, out)
		}
		// The one-host form over 1 MiB.
		one := `{"ip":"10.9.0.2","port":8000,"notes":"` + strings.Repeat("x", 1<<20) + `"}`
		code, out = e.do("POST", "/orgs/default/hosts", one)
		if code != 413 || !strings.Contains(out, admin.CodeBodyTooLarge) || !strings.Contains(out, fmt.Sprint(1<<20)) {
			t.Fatalf("one host over 1 MiB: %d %.300s", code, out)
		}
	})
}
