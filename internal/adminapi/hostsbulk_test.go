package adminapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/adminapi"
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

// Two batches into different projects of one org that share every
// address, sent at once and inserting them in opposite orders: one is
// created, the other is a 409 naming a shared address, never a
// deadlock's 500 (PostgreSQL's unique index on the address is org-wide,
// while the pool locks are per project). Three rounds, each with fresh
// addresses.
func TestCreateHostsConcurrentBatchesShareAddresses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newEnv(t, d, nil)
		e.ok("POST", "/orgs/default/projects", `{"name":"other"}`, 201)
		const n = 200
		post := func(body string) (int, string, error) {
			req, err := http.NewRequest("POST", e.srv.URL+adminapi.Prefix+"/orgs/default/hosts", strings.NewReader(body))
			if err != nil {
				return 0, "", err
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		for round := range 3 {
			batch := func(project string, reverse bool) string {
				items := make([]string, n)
				for i := range items {
					k := i
					if reverse {
						k = n - 1 - i
					}
					items[i] = fmt.Sprintf(`{"ip":"10.6.%d.%d","port":8000,"project":%q,"model_name":"qwen3","recipe":{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18}}}`,
						round, k+1, project)
				}
				return `{"hosts":[` + strings.Join(items, ",") + `]}`
			}
			bodies := []string{batch("default", false), batch("other", true)}
			type answer struct {
				code int
				body string
				err  error
			}
			answers := make([]answer, len(bodies))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, b := range bodies {
				wg.Go(func() {
					<-start
					var a answer
					a.code, a.body, a.err = post(b)
					answers[i] = a
				})
			}
			close(start)
			wg.Wait()
			created, refused := 0, 0
			for i, a := range answers {
				switch {
				case a.err != nil:
					t.Fatalf("round %d, batch %d: %v", round, i, a.err)
				case a.code == 201:
					created++
				case a.code == 409 && strings.Contains(a.body, `"code":"`+admin.CodeConflict+`"`) &&
					strings.Contains(a.body, fmt.Sprintf("already has the address 10.6.%d.", round)):
					refused++
				default:
					t.Fatalf("round %d, batch %d: %d %.400s", round, i, a.code, a.body)
				}
			}
			if created != 1 || refused != 1 {
				t.Fatalf("round %d: %d created, %d refused: %+v", round, created, refused, answers)
			}
		}
		var list struct {
			Data []any `json:"data"`
		}
		_, out := e.do("GET", "/orgs/default/hosts?limit=1000", "")
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Data) != 3*n {
			t.Fatalf("hosts after the rounds: %d (%v), want %d", len(list.Data), err, 3*n)
		}
	})
}
