package cli

import (
	"encoding/csv"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/testkit"
)

func TestUsageCommands(t *testing.T) {
	// The demo route of the default org, called with a key of its own so
	// that the filters pick out this test's records.
	r := rolter(t, "keys", "create", "--name", "t-usage")
	key := regexp.MustCompile(`(?m)^secret \(shown once\): (rk-\S+)$`).FindStringSubmatch(r.stdout)[1]
	for range 3 {
		chat(t, gw, key, "demo")
	}
	var items []map[string]any
	testkit.Eventually(t, "three usage records", func() bool {
		r := rolter(t, "usage", "list", "--key", "t-usage", "-o", "json")
		items = nil
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &items) == nil && len(items) == 3
	})
	if items[0]["route"] != "demo" || items[0]["project"] != "default" {
		t.Errorf("usage record: %v", items[0])
	}

	table := must(t, "usage", "list", "--key", "t-usage", "--since", "1h", "--model", "demo", "--project", "default")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") {
		t.Errorf("usage list table:\n%s", table)
	}
	if r := rolter(t, "usage", "list", "--key", "t-usage", "--limit", "2"); r.code != 0 ||
		strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "showing the first 2; more exist") {
		t.Errorf("usage list --limit 2: %v", r)
	}
	// until is exclusive: nothing before the first record.
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if n := len(jsonList(t, "usage", "list", "--key", "t-usage", "--until", since)); n != 0 {
		t.Errorf("--until an hour ago: %d records", n)
	}

	sum := must(t, "usage", "summary", "--key", "t-usage", "--group-by", "key,model")
	if !regexp.MustCompile(`(?m)^KEY_ID\s+KEY\s+MODEL\s+REQUESTS\s+PROMPT_TOKENS\s+COMPLETION_TOKENS\s+COST_USD\s+UNPRICED$`).MatchString(sum) ||
		!regexp.MustCompile(`(?m)^\d+\s+t-usage\s+demo\s+3\s`).MatchString(sum) {
		t.Errorf("usage summary table:\n%s", sum)
	}
	var s struct {
		Currency string
		Data     []struct{ Requests int }
	}
	if err := json.Unmarshal([]byte(must(t, "usage", "summary", "--key", "t-usage", "-o", "json")), &s); err != nil ||
		s.Currency != "USD" || len(s.Data) != 1 || s.Data[0].Requests != 3 {
		t.Errorf("usage summary json: %v %+v", err, s)
	}
	rows, err := csv.NewReader(strings.NewReader(must(t, "usage", "summary", "--key", "t-usage", "--group-by", "day", "-o", "csv"))).ReadAll()
	if err != nil || len(rows) != 2 || rows[0][0] != "day" || rows[1][1] != "3" {
		t.Errorf("usage summary csv: %v %v", err, rows)
	}

	// A bad filter value is the API's 400; csv outside the summary and a
	// bad group are refused.
	r = wantExit(t, ExitUsage, "usage", "summary", "--group-by", "colour")
	if !strings.Contains(r.stderr, "group_by") {
		t.Errorf("bad group_by: %v", r)
	}
	wantExit(t, ExitUsage, "usage", "list", "-o", "csv")
	wantExit(t, ExitUsage, "usage", "list", "--since", "yesterday-ish")
	testkit.AssertNoSecrets(t, "usage output", table+sum, key)
}

func TestListFollowsCursors(t *testing.T) {
	newOrg(t, "t-pages")
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		must(t, "providers", "create", "--org", "t-pages", "--name", p, "--kind", "vllm", "--base-url", "http://127.0.0.1:9/v1")
	}
	c, err := NewClient(gw.url, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.pageSize = 2
	type slug struct{ Slug string }
	all, more, err := List[slug](t.Context(), c, ProvidersPath("t-pages"), nil, 100)
	if err != nil || more || len(all) != 5 || all[0].Slug != "p1" || all[4].Slug != "p5" {
		t.Fatalf("in pages of 2: %v %v %v", all, more, err)
	}
	for max, wantMore := range map[int]bool{3: true, 4: true, 5: false} {
		got, more, err := List[slug](t.Context(), c, ProvidersPath("t-pages"), nil, max)
		if err != nil || more != wantMore || len(got) != min(max, 5) {
			t.Errorf("max %d: %d items, more %v, %v", max, len(got), more, err)
		}
	}
	if r := rolter(t, "providers", "list", "--org", "t-pages", "--limit", "5"); r.stderr != "" || strings.Count(r.stdout, "\n") != 6 {
		t.Errorf("a list of exactly --limit is not truncated: %v", r)
	}
}
