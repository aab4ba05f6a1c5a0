package ui

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// usageSeed is what seedUsage stored: the virtual keys' ids.
type usageSeed struct{ alice, bob int64 }

// seedUsage stores usage records as the gateway's accounting writes them
// (the store's InsertUsage, as the admin API's usage tests do), around the
// harness clock's now (2026-01-02 03:04:05 UTC): in the last 24 hours
// route chat has 5 requests (one a 499), embed 2 (one a 503) and one
// request pinned to a provider got a 429; one chat request is two days
// older, and another org has one of its own.
func seedUsage(t testing.TB, h *harness) usageSeed {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "batch"})
	must(err)
	_, err = h.svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"})
	must(err)
	alice, err := h.svc.CreateVirtualKey(ctx, "default", "default", admin.VirtualKeyInput{Name: "alice"})
	must(err)
	bob, err := h.svc.CreateVirtualKey(ctx, "default", "batch", admin.VirtualKeyInput{Name: "bob"})
	must(err)
	org, err := h.db.GetOrg(ctx, "default")
	must(err)
	acme, err := h.db.GetOrg(ctx, "acme")
	must(err)
	def, err := h.db.GetProject(ctx, org.ID, "default")
	must(err)
	batch, err := h.db.GetProject(ctx, org.ID, "batch")
	must(err)
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	cost := money.Amount(1_000_000) // $0.001
	chat := func(when time.Time, key, project int64, status int, class string, ms int64, pt, ct int) store.UsageRecord {
		return store.UsageRecord{CreatedAt: when, OrgID: org.ID, ProjectID: project, KeyID: key, AddressKind: "route",
			Address: "chat", Route: "chat", ProviderID: 1, ProviderSlug: "alpha", UpstreamModel: "m1", Status: status, Class: class,
			Attempts: 1, Latency: time.Duration(ms) * time.Millisecond, PromptTokens: pt, CompletionTokens: ct, Cost: &cost}
	}
	recs := []store.UsageRecord{
		chat(at(1, 10), alice.ID, def.ID, 200, "", 100, 10, 20),
		chat(at(1, 20), alice.ID, def.ID, 200, "", 300, 10, 30),
		chat(at(1, 30), bob.ID, batch.ID, 200, "", 200, 5, 5),
		chat(at(2, 20), alice.ID, def.ID, 200, "", 400, 20, 40),
		chat(at(3, 2), alice.ID, def.ID, 499, "client_cancelled", 900, 10, 0),
		chat(at(-38, 0), alice.ID, def.ID, 200, "", 100, 1, 1), // 2025-12-31 10:00, outside the last 24 h
		{CreatedAt: at(2, 30), OrgID: org.ID, ProjectID: def.ID, KeyID: alice.ID, AddressKind: "route", Address: "embed", Route: "embed",
			ProviderID: 2, ProviderSlug: "beta", UpstreamModel: "e5", Status: 200, Attempts: 1, Latency: 50 * time.Millisecond, PromptTokens: 100},
		{CreatedAt: at(2, 40), OrgID: org.ID, ProjectID: def.ID, KeyID: alice.ID, AddressKind: "route", Address: "embed", Route: "embed",
			ProviderID: 2, ProviderSlug: "beta", UpstreamModel: "e5", Status: 503, Class: "upstream_unavailable", Attempts: 2,
			Latency: 1500 * time.Millisecond},
		{CreatedAt: at(3, 1), OrgID: org.ID, ProjectID: def.ID, KeyID: alice.ID, AddressKind: "provider", Address: "alpha/m1",
			ProviderID: 1, ProviderSlug: "alpha", UpstreamModel: "m1", Status: 429, Class: "rate_limited", Attempts: 1, Latency: 20 * time.Millisecond},
		{CreatedAt: at(2, 0), OrgID: acme.ID, ProjectID: 999, KeyID: 999, AddressKind: "route", Address: "chat", Route: "chat",
			Status: 200, Attempts: 1, Latency: time.Millisecond},
	}
	must(h.db.InsertUsage(ctx, recs))
	return usageSeed{alice: alice.ID, bob: bob.ID}
}

var (
	usageRowRe = regexp.MustCompile(`(?s)<tr>\s*<th scope="row">(?:<span class="swatch [^"]*"></span>)?(?:<span class="addr">)?([^<]*)(?:</span>)?</th>(.*?)</tr>`)
	cellRe     = regexp.MustCompile(`<td class="num">(?:<span[^>]*>)?([^<]*)`)
	hrefRe     = regexp.MustCompile(`href="([^"]*)"[^>]*id="csv-(series|table)"`)
)

// usageTable reads the table's rows (tbody, then the total) as the cells
// a person sees, "label|requests|...".
func usageTable(body string) []string {
	var out []string
	for _, m := range usageRowRe.FindAllStringSubmatch(body, -1) {
		row := []string{htmlUnescape(m[1])}
		for _, c := range cellRe.FindAllStringSubmatch(m[2], -1) {
			row = append(row, htmlUnescape(c[1]))
		}
		out = append(out, strings.Join(row, "|"))
	}
	return out
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "&#34;", `"`, "&#39;", "'", "&quot;", `"`).Replace(s)
}

// csvLinks returns the page's two CSV links.
func csvLinks(t *testing.T, body string) (series, table string) {
	t.Helper()
	for _, m := range hrefRe.FindAllStringSubmatch(body, -1) {
		if m[2] == "series" {
			series = htmlUnescape(m[1])
		} else {
			table = htmlUnescape(m[1])
		}
	}
	if series == "" || table == "" {
		t.Fatalf("no CSV links in:\n%s", body)
	}
	return series, table
}

func readCSV(t *testing.T, b *browser, path string) [][]string {
	t.Helper()
	r := b.get(path)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") ||
		!strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("CSV %s: %d %v\n%s", path, r.status, r.header, r.body)
	}
	rows, err := csv.NewReader(strings.NewReader(r.body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV %s: %v\n%s", path, err, r.body)
	}
	return rows
}

func TestUsageChartsTableAndCSV(t *testing.T) {
	h := newHarness(t, Options{})
	seedUsage(t, h)
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/usage")
	if r.status != http.StatusOK {
		t.Fatalf("usage: %d\n%s", r.status, r.body)
	}
	mustContain(t, "usage", r.body, "<strong>8</strong> requests", "<strong>2</strong> errors",
		"2026-01-01 03:04 UTC to 2026-01-02 03:04 UTC, by the hour, by route (3)",
		// Four charts, a line per route, a hover title on each point.
		`id="chart-requests"`, `id="chart-tokens"`, `id="chart-errors"`, `id="chart-latency"`,
		`<g class="series s0" data-series="chat">`, `<g class="series s1" data-series="embed">`, `data-series="(not by route)"`,
		"<title>chat · 2026-01-02 01:00–02:00 UTC · 3 requests</title>",
		"<title>embed · 2026-01-02 02:00–03:00 UTC · 1 errors of 2 requests</title>",
		"<title>embed · 2026-01-02 02:00–03:00 UTC · p95 1,500 ms, p50 50 ms over 2 requests</title>",
		// Axes with units.
		`<text class="axis-unit" x="58" y="24" dy="-10">requests</text>`, `>ms</text>`, ">time (UTC)</text>")
	mustNotContain(t, "usage", r.body, "style=")
	if n := strings.Count(r.body, `<g class="series `); n != 4*3 {
		t.Fatalf("%d series groups, want 3 in each of 4 charts", n)
	}
	// 25 hourly buckets, a point for each in the count charts.
	if n := strings.Count(r.body, "<title>chat · "); n != 25*3+3 {
		t.Fatalf("chat has %d points, want 25 in each count chart and 3 in latency", n)
	}
	rows := usageTable(r.body)
	want := []string{
		"chat|5|55|95|$0.0050|0|0.0 %|300 ms|900 ms",
		"embed|2|100|0|—|1|50.0 %|50 ms|1,500 ms",
		"(not by route)|1|0|0|—|1|100.0 %|20 ms|20 ms",
		"Total|8|155|95|$0.0050|2|25.0 %|200 ms|1,500 ms",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table\n got %q\nwant %q", rows, want)
	}
	// The table's CSV holds exactly its rows.
	seriesURL, tableURL := csvLinks(t, r.body)
	got := readCSV(t, b, tableURL)
	wantCSV := [][]string{
		{"route", "requests", "prompt_tokens", "completion_tokens", "cost_usd", "errors", "error_rate_percent", "latency_p50_ms", "latency_p95_ms"},
		{"chat", "5", "55", "95", "0.005", "0", "0.0", "300", "900"},
		{"embed", "2", "100", "0", "", "1", "50.0", "50", "1500"},
		{"(not by route)", "1", "0", "0", "", "1", "100.0", "20", "20"},
		{"Total", "8", "155", "95", "0.005", "2", "25.0", "200", "1500"},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantCSV) {
		t.Fatalf("table CSV\n got %q\nwant %q", got, wantCSV)
	}
	if !strings.Contains(tableURL, "since=2026-01-01T03%3A04%3A05Z") || !strings.Contains(tableURL, "until=2026-01-02T03%3A04%3A05Z") {
		t.Fatalf("the CSV link does not pin the range shown: %s", tableURL)
	}
	// The charts' CSV: a row per bucket and line.
	pts := readCSV(t, b, seriesURL)
	if len(pts) != 1+25*3 {
		t.Fatalf("series CSV has %d rows", len(pts))
	}
	if fmt.Sprint(pts[0]) != "[bucket_start route requests prompt_tokens completion_tokens errors latency_p50_ms latency_p95_ms]" {
		t.Fatalf("series CSV header %q", pts[0])
	}
	var chat01 []string
	for _, p := range pts {
		if p[0] == "2026-01-02T01:00:00Z" && p[1] == "chat" {
			chat01 = p
		}
	}
	if fmt.Sprint(chat01) != "[2026-01-02T01:00:00Z chat 3 25 55 0 200 300]" {
		t.Fatalf("chat at 01:00: %q", chat01)
	}
	// A later download of the same link holds the same rows.
	h.clock.Advance(2 * time.Hour)
	if again := readCSV(t, b, tableURL); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("the CSV changed with time:\n%q\n%q", again, got)
	}
}

func TestUsageFiltersAndGrouping(t *testing.T) {
	h := newHarness(t, Options{})
	seed := seedUsage(t, h)
	b := h.browser()
	b.login(h.token)
	cases := []struct {
		query string
		rows  []string
	}{
		{"group_by=key", []string{
			fmt.Sprintf("alice (#%d)|7|150|90|$0.0040|2|28.6 %%|300 ms|1,500 ms", seed.alice),
			fmt.Sprintf("bob (#%d)|1|5|5|$0.0010|0|0.0 %%|200 ms|200 ms", seed.bob)}},
		{"group_by=provider", []string{"alpha|6|55|95|$0.0050|1|16.7 %|200 ms|900 ms", "beta|2|100|0|—|1|50.0 %|50 ms|1,500 ms"}},
		{"group_by=model", []string{"chat|5|55|95|$0.0050|0|0.0 %|300 ms|900 ms", "embed|2|100|0|—|1|50.0 %|50 ms|1,500 ms",
			"alpha/m1|1|0|0|—|1|100.0 %|20 ms|20 ms"}},
		{"group_by=project", []string{"default|7|150|90|$0.0040|2|28.6 %|300 ms|1,500 ms", "batch|1|5|5|$0.0010|0|0.0 %|200 ms|200 ms"}},
		{"group_by=none", []string{"all requests|8|155|95|$0.0050|2|25.0 %|200 ms|1,500 ms"}},
		{"project=batch", []string{"chat|1|5|5|$0.0010|0|0.0 %|200 ms|200 ms"}},
		{"route=embed&group_by=provider", []string{"beta|2|100|0|—|1|50.0 %|50 ms|1,500 ms"}},
		{"key=bob", []string{"chat|1|5|5|$0.0010|0|0.0 %|200 ms|200 ms"}},
		{"provider=alpha&model=alpha/m1", []string{"(not by route)|1|0|0|—|1|100.0 %|20 ms|20 ms"}},
		// Ages count back from now; 7 days are shown by the day.
		{"since=7d&route=chat", []string{"chat|6|56|96|$0.0060|0|0.0 %|200 ms|900 ms"}},
		{"since=2026-01-02&until=2026-01-02T02:00:00Z", []string{"chat|3|25|55|$0.0030|0|0.0 %|200 ms|300 ms"}},
	}
	for _, c := range cases {
		r := b.get("/ui/usage?" + c.query)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", c.query, r.status, r.body)
		}
		rows := usageTable(r.body)
		if len(rows) == 0 || strings.Join(rows[:len(rows)-1], "\n") != strings.Join(c.rows, "\n") {
			t.Fatalf("%s\n got %q\nwant %q", c.query, rows, c.rows)
		}
		// Every view's table CSV has the same rows (and the total).
		_, tableURL := csvLinks(t, r.body)
		if got := readCSV(t, b, tableURL); len(got) != len(rows)+1 {
			t.Fatalf("%s: CSV has %d rows for %d shown", c.query, len(got)-1, len(rows))
		}
	}
	r := b.get("/ui/usage?since=7d&route=chat")
	mustContain(t, "7 days", r.body, "2025-12-26 03:04 UTC to 2026-01-02 03:04 UTC, by the day", ">Dec 26</text>",
		"<title>chat · 2025-12-31 (UTC) · 1 requests</title>", `class="btn btn-small active" href="/ui/usage?group_by=route&amp;org=default&amp;route=chat&amp;since=7d" aria-current="true">7 days</a>`)
	// The project selector offers every project, and keeps the choice.
	r = b.get("/ui/usage?project=batch")
	mustContain(t, "project", r.body, `<option value="batch" selected>batch</option>`, `<option value="">all projects</option>`)
}

func TestUsageBadFiltersShowNextToTheirFields(t *testing.T) {
	h := newHarness(t, Options{})
	seedUsage(t, h)
	b := h.browser()
	b.login(h.token)
	for _, c := range []struct{ query, field, msg, kept string }{
		{"since=yesterday", "since", "must be an RFC 3339 time", `value="yesterday"`},
		{"since=2026-01-02&until=2026-01-01", "until", "must be after since", `value="2026-01-01"`},
		{"group_by=colour", "group_by", "takes one of route, provider, key, model, project, none", ""},
		{"interval=minute&route=chat", "interval", "takes hour or day", `value="chat"`},
		{"since=2025-01-01&interval=hour", "interval", "hours; a chart shows at most 200", `value="2025-01-01"`},
		{"since=2020-01-01", "since", "days; a chart shows at most 200", ""},
		{"key=0", "key", "must be a virtual key id", `value="0"`},
		{"route=bad%20route", "route", "", `value="bad route"`},
	} {
		r := b.get("/ui/usage?" + c.query)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d", c.query, r.status)
		}
		mustContain(t, c.query, r.body, `id="err-`+c.field+`"`, "validation_failed", c.msg, c.kept)
		mustNotContain(t, c.query, r.body, "<svg", `id="usage-table"`)
	}
	r := b.get("/ui/usage?project=nope")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown project: %d", r.status)
	}
	mustContain(t, "unknown project", r.body, "not_found", "nope")
	if r := b.get("/ui/usage/_csv?since=yesterday&of=table"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "validation_failed") {
		t.Fatalf("CSV of a bad filter: %d %s", r.status, r.body)
	}
	if r := b.get("/ui/usage/_csv?of=pie"); r.status != http.StatusBadRequest {
		t.Fatalf("CSV of=pie: %d", r.status)
	}
}

func TestUsageFoldsSeriesPastEightIntoOther(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	pj, err := h.db.GetProject(ctx, org.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	// Ten routes, route-0 with 10 requests down to route-9 with 1, and
	// one named as markup.
	var recs []store.UsageRecord
	names := []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-5", "r-6", "r-7", "r-8", `<img src=x onerror=alert(1)>`}
	for i, name := range names {
		for j := range 10 - i {
			recs = append(recs, store.UsageRecord{CreatedAt: h.clock.Now().Add(-time.Duration(j+1) * time.Minute), OrgID: org.ID, ProjectID: pj.ID,
				KeyID: 1, AddressKind: "route", Address: name, Route: name, Status: 200, Attempts: 1})
		}
	}
	if err := h.db.InsertUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/usage")
	if n := strings.Count(r.body, `<g class="series `); n != 4*8 {
		t.Fatalf("%d series groups, want 8 in each of 4 charts", n)
	}
	mustContain(t, "fold", r.body, `<g class="series s6" data-series="r-6">`, `<g class="series s-other" data-series="other (3 more)">`,
		`<li><span class="swatch s-other"></span>other (3 more)</li>`,
		"<title>other (3 more) · 2026-01-02 03:00–04:00 UTC · 6 requests</title>",
		"&lt;img src=x onerror=alert(1)&gt;")
	mustNotContain(t, "fold", r.body, "<img src=x")
	// The table lists every route; the charts' CSV the eight lines.
	if rows := usageTable(r.body); len(rows) != 11 || rows[9] != "<img src=x onerror=alert(1)>|1|0|0|—|0|0.0 %|0 ms|0 ms" {
		t.Fatalf("table: %q", rows)
	}
	seriesURL, _ := csvLinks(t, r.body)
	pts := readCSV(t, b, seriesURL)
	if len(pts) != 1+25*8 || pts[8][1] != "other (3 more)" {
		t.Fatalf("series CSV: %d rows, %q", len(pts), pts[:9])
	}
}

func TestUsageOverTheDetailCapShowsCountsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 10,001 usage records")
	}
	h := newHarness(t, Options{})
	ctx := context.Background()
	org, err := h.db.GetOrg(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	pj, err := h.db.GetProject(ctx, org.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]store.UsageRecord, usageDetailCap+1)
	for i := range recs {
		recs[i] = store.UsageRecord{CreatedAt: h.clock.Now().Add(-time.Duration(i%600+1) * time.Second), OrgID: org.ID, ProjectID: pj.ID,
			KeyID: 1, AddressKind: "route", Address: "chat", Route: "chat", Status: 503, Attempts: 1, PromptTokens: 2}
	}
	if err := h.db.InsertUsage(ctx, recs); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	r := b.get("/ui/usage")
	mustContain(t, "over the cap", r.body, "<strong>10,001</strong> requests", "This range holds more than 10,000 requests",
		"Computed from the requests themselves, which are shown only for ranges of at most 10,000 requests")
	mustNotContain(t, "over the cap", r.body, "errors of")
	if rows := usageTable(r.body); rows[0] != "chat|10,001|20,002|0|—|—|—|—|—" {
		t.Fatalf("table: %q", rows)
	}
	_, tableURL := csvLinks(t, r.body)
	if got := readCSV(t, b, tableURL); strings.Join(got[1], ",") != "chat,10001,20002,0,,,,," {
		t.Fatalf("CSV: %q", got[1])
	}
}

func TestUsageWindow(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	for _, c := range []struct {
		form                   usageForm
		since, until, interval string
		buckets                int
	}{
		{usageForm{GroupBy: "route"}, "2026-01-01T03:04:05Z", "2026-01-02T03:04:05Z", "hour", 25},
		{usageForm{GroupBy: "route", Since: "3d"}, "2025-12-30T03:04:05Z", "2026-01-02T03:04:05Z", "hour", 73},
		{usageForm{GroupBy: "route", Since: "4d"}, "2025-12-29T03:04:05Z", "2026-01-02T03:04:05Z", "day", 5},
		{usageForm{GroupBy: "route", Since: "2026-01-01", Until: "2026-01-02"}, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "hour", 24},
		{usageForm{GroupBy: "none", Since: "2026-01-01", Until: "2026-01-02", Interval: "day"}, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "day", 1},
		{usageForm{GroupBy: "route", Until: "48h"}, "2025-12-30T03:04:05Z", "2025-12-31T03:04:05Z", "hour", 25},
	} {
		sq, w, err := c.form.resolve(now)
		if err != nil {
			t.Fatalf("%+v: %v", c.form, err)
		}
		if got := w.Since.Format(time.RFC3339) + " " + w.Until.Format(time.RFC3339) + " " + w.Interval; got != c.since+" "+c.until+" "+c.interval ||
			len(w.Buckets) != c.buckets {
			t.Fatalf("%+v: %s, %d buckets", c.form, got, len(w.Buckets))
		}
		if sq.Since == "" || sq.Until == "" || sq.GroupBy[0] != c.interval || (c.form.GroupBy == "none") != (len(sq.GroupBy) == 1) {
			t.Fatalf("%+v: query %+v", c.form, sq)
		}
	}
}

func TestNiceScaleAndCompact(t *testing.T) {
	for _, c := range []struct{ max, top, step float64 }{
		{0, 1, 1}, {1, 1, 1}, {3, 3, 1}, {7, 8, 2}, {10, 10, 5}, {12, 15, 5}, {95, 100, 50}, {101, 150, 50}, {1234, 1500, 500}, {40_001, 60_000, 20_000},
	} {
		if top, step := niceScale(c.max); top != c.top || step != c.step {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", c.max, top, step, c.top, c.step)
		}
	}
	for v, want := range map[float64]string{0: "0", 950: "950", 1500: "1.5k", 20_000: "20k", 2_500_000: "2.5M", 3e9: "3G", 0.25: "0.25"} {
		if got := compact(v); got != want {
			t.Errorf("compact(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestBrowserUsageChartsTableAndFilter(t *testing.T) {
	h := newHarness(t, Options{})
	demoLike(t, h)
	seedUsage(t, h)
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("usage", "/ui/usage", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/usage"]`)), chromedp.WaitVisible(chromedp.CSS("#usage-table")))
	// A chart with its lines drawn and a hover title on the points.
	tb.waitFor("chart drawn", `(() => {
		const s = document.querySelectorAll('#chart-requests svg g.series');
		const p = document.querySelector('#chart-requests svg g.series path');
		return s.length === 3 && p && p.getTotalLength() > 100 &&
			document.querySelector('#chart-requests circle title').textContent.startsWith('chat · ');
	})()`)
	if got := tb.text("#usage-table tbody tr"); !strings.Contains(got, "chat") || !strings.Contains(got, "900 ms") {
		t.Fatalf("first table row: %q", got)
	}
	if got := tb.text(".legend"); !strings.Contains(got, "embed") || !strings.Contains(got, "(not by route)") {
		t.Fatalf("legend: %q", got)
	}
	tb.screenshot("usage")
	// Filter by key: the form's GET puts the filters in the address.
	tb.do("pick key", chromedp.SetValue(chromedp.CSS("#usage-group"), "key"))
	tb.navigate("group by key", "/ui/usage", chromedp.Submit(chromedp.CSS("#usage-group")), chromedp.WaitVisible(chromedp.CSS("#usage-table")))
	tb.waitFor("grouped by key", `location.search.includes('group_by=key') &&
		document.querySelector('#usage-table tbody').innerText.includes('alice (#')`)
	tb.do("type a bad since", chromedp.SetValue(chromedp.CSS("#usage-since"), "last week"))
	tb.navigate("a bad since", "/ui/usage", chromedp.Submit(chromedp.CSS("#usage-since")), chromedp.WaitVisible(chromedp.CSS("#err-since")))
	if got := tb.text("#err-since"); !strings.Contains(got, "RFC 3339") || !strings.Contains(got, "validation_failed") {
		t.Fatalf("since error: %q", got)
	}
	tb.screenshot("usage-bad-filter")
	tb.clean()
}
