package ui

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// The Usage page (issue 16, page 7; UI.md "Charts"): requests, tokens,
// errors and latency over time with one series per route, provider, key,
// model or project, as server-rendered SVG (usagechart.go); the totals per
// series as a table; and both as CSV, exactly as shown (usagecsv.go).
// Every filter is in the query string, so a view is a link.
//
// Requests, tokens and cost come from the Service's usage summary
// (SummarizeUsage grouped by the interval and the dimension: one store
// query, whatever the range). The summary carries no error count and no
// latency, so those are computed here from the records themselves
// (ListUsage), and only while the range holds at most usageDetailCap
// requests: past that the page says so instead of passing a part off as
// the whole.
func init() {
	mount("usage", func(u *UI) {
		u.get("/usage", u.usage)
		u.get("/usage/_csv", u.usageCSV)
	})
}

const (
	// usageDetailCap bounds the records read for errors and latency.
	usageDetailCap = 10_000
	// usageMaxPoints bounds the buckets of a chart (a week by the hour).
	usageMaxPoints = 200
	// usageMaxSeries is the most lines a chart draws; past it the
	// smallest series are folded into "other".
	usageMaxSeries = 8
	// usageDefaultRange is the range shown when since is not given.
	usageDefaultRange = 24 * time.Hour
	// usageAutoHourly: a range up to this long is shown by the hour when
	// no interval is chosen, a longer one by the day.
	usageAutoHourly = 72 * time.Hour
	// usageSummaryGroups is the summary's group limit (the Service's
	// maximum): buckets times series values.
	usageSummaryGroups = 10_000
)

// usageDims are the group_by choices: the summary's dimensions, or none.
var usageDims = []string{store.GroupRoute, store.GroupProvider, store.GroupKey, store.GroupModel, store.GroupProject, "none"}

// usageForm is the filter form as typed (the query string).
type usageForm struct {
	Project, Key, Route, Provider, Model, Since, Until string
	// GroupBy is a usageDims entry (default route); Interval hour, day
	// or "" (auto).
	GroupBy, Interval string
}

func usageFormOf(r *request) usageForm {
	v := func(k string) string { return strings.TrimSpace(r.FormValue(k)) }
	return usageForm{Project: v("project"), Key: v("key"), Route: v("route"), Provider: v("provider"), Model: v("model"),
		Since: v("since"), Until: v("until"), GroupBy: cmp.Or(v("group_by"), store.GroupRoute), Interval: v("interval")}
}

// pairs is the form as link arguments, with over replacing some values.
func (f usageForm) pairs(over ...string) []string {
	kv := []string{"project", f.Project, "key", f.Key, "route", f.Route, "provider", f.Provider, "model", f.Model,
		"since", f.Since, "until", f.Until, "group_by", f.GroupBy, "interval", f.Interval}
	for i := 0; i+1 < len(over); i += 2 {
		if j := slices.Index(kv, over[i]); j >= 0 && j%2 == 0 {
			kv[j+1] = over[i+1]
		} else {
			kv = append(kv, over[i], over[i+1])
		}
	}
	return kv
}

// usageWindow is what a form resolves to: absolute times and buckets.
type usageWindow struct {
	Since, Until time.Time
	Interval     string // hour or day
	Buckets      []time.Time
}

func (w usageWindow) step() time.Duration {
	if w.Interval == store.GroupDay {
		return 24 * time.Hour
	}
	return time.Hour
}

// relativeRe is a time given as an age: "24h" or "7d" ago.
var relativeRe = regexp.MustCompile(`^([0-9]{1,4})([hd])$`)

// absolute turns an age ("7d") into an RFC 3339 time before now, and
// leaves anything else for the Service to check.
func absolute(v string, now time.Time) string {
	m := relativeRe.FindStringSubmatch(v)
	if m == nil {
		return v
	}
	n, _ := strconv.Atoi(m[1])
	d := time.Duration(n) * time.Hour
	if m[2] == "d" {
		d *= 24
	}
	return now.Add(-d).UTC().Format(time.RFC3339)
}

// parseUsageTime reads a time as the Service does (RFC 3339 or a date,
// UTC); the Service has checked it already.
func parseUsageTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC()
	}
	t, _ := time.Parse(time.DateOnly, v)
	return t
}

// resolve checks the form and turns it into the summary's query and the
// window: since and until default to the last usageDefaultRange, ages
// ("7d") count back from now, and the interval defaults by the range's
// length. Bad input is an admin.Invalid naming each field, as the API's
// own checks (SummaryQuery.Problems) and the page's word it.
func (f usageForm) resolve(now time.Time) (admin.SummaryQuery, usageWindow, error) {
	now = now.UTC().Truncate(time.Second)
	until := cmp.Or(absolute(f.Until, now), now.Format(time.RFC3339))
	since := absolute(f.Since, now)
	q := admin.UsageQuery{Project: f.Project, Key: f.Key, Route: f.Route, Provider: f.Provider, Model: f.Model, Since: since, Until: until}
	sq := admin.SummaryQuery{UsageQuery: q, Limit: usageSummaryGroups}
	fields := sq.Problems()
	if !slices.Contains(usageDims, f.GroupBy) {
		fields["group_by"] = "takes one of " + strings.Join(usageDims, ", ")
	}
	if f.Interval != "" && f.Interval != store.GroupHour && f.Interval != store.GroupDay {
		fields["interval"] = "takes hour or day (empty: hour up to 3 days, else day)"
	}
	if len(fields) > 0 {
		return sq, usageWindow{}, admin.Invalid(fields)
	}
	w := usageWindow{Until: parseUsageTime(until), Interval: f.Interval}
	if since == "" {
		w.Since = w.Until.Add(-usageDefaultRange)
		sq.Since = w.Since.Format(time.RFC3339Nano)
	} else {
		w.Since = parseUsageTime(since)
	}
	if w.Interval == "" {
		w.Interval = store.GroupDay
		if w.Until.Sub(w.Since) <= usageAutoHourly {
			w.Interval = store.GroupHour
		}
	}
	step := w.step()
	first := w.Since.Truncate(step) // UTC: day buckets start at midnight UTC
	n := int(w.Until.Add(-time.Nanosecond).Truncate(step).Sub(first)/step) + 1
	if n > usageMaxPoints {
		field := "interval"
		if w.Interval == store.GroupDay {
			field = "since"
		}
		return sq, w, admin.Invalid(map[string]string{field: "the range holds " + strconv.Itoa(n) + " " + w.Interval +
			"s; a chart shows at most " + strconv.Itoa(usageMaxPoints) + ": narrow since/until or choose a longer interval"})
	}
	for i := range n {
		w.Buckets = append(w.Buckets, first.Add(time.Duration(i)*step))
	}
	sq.GroupBy = []string{w.Interval}
	if f.GroupBy != "none" {
		sq.GroupBy = append(sq.GroupBy, f.GroupBy)
	}
	return sq, w, nil
}

// usageCell sums the requests of one series in one bucket (or in all).
type usageCell struct {
	Requests, Prompt, Completion int64
	Cost                         money.Amount
	Priced                       int64
	// Errors and the latencies (ms) come from the records; they are
	// meaningful only when the data's Detail is set.
	Errors int64
	lat    []int64
}

func (c *usageCell) add(o *usageCell) {
	c.Requests += o.Requests
	c.Prompt += o.Prompt
	c.Completion += o.Completion
	c.Cost += o.Cost
	c.Priced += o.Priced
	c.Errors += o.Errors
	c.lat = append(c.lat, o.lat...)
}

// Tokens is prompt plus completion.
func (c *usageCell) Tokens() int64 { return c.Prompt + c.Completion }

// latency is the p-th percentile (nearest rank) of the cell's latencies in
// ms; ok is false without any.
func (c *usageCell) latency(p float64) (ms int64, ok bool) {
	if len(c.lat) == 0 {
		return 0, false
	}
	if !slices.IsSorted(c.lat) {
		slices.Sort(c.lat)
	}
	i := int(math.Ceil(p*float64(len(c.lat)))) - 1
	return c.lat[max(i, 0)], true
}

// usageSeries is one value of the dimension (or "other"): a cell per
// bucket and the total.
type usageSeries struct {
	// ID is the value as the dimension has it (a key's id); Label is
	// what the page shows.
	ID, Label string
	KeyID     int64
	KeyName   string
	// Class colours the series (s0..s7, s-other).
	Class string
	Cells []usageCell
	Total usageCell
}

// usageData is everything the page and the CSV show.
type usageData struct {
	Window  usageWindow
	GroupBy string
	// Detail reports that errors and latency were computed (the range
	// held at most usageDetailCap requests).
	Detail bool
	// All is every series, largest first (the table); Plotted at most
	// usageMaxSeries of them, the rest folded into "other" (the charts).
	All, Plotted []*usageSeries
	Total        usageCell
}

// usageTime is a time as the page writes it.
func usageTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// dimLabel is how a series is named.
func dimLabel(dim, v string, keyID int64, keyName string) string {
	switch {
	case dim == "none":
		return "all requests"
	case dim == store.GroupKey && keyName != "":
		return keyName + " (#" + strconv.FormatInt(keyID, 10) + ")"
	case dim == store.GroupKey:
		return "#" + strconv.FormatInt(keyID, 10) + " (deleted)"
	case v != "":
		return v
	case dim == store.GroupRoute:
		return "(not by route)"
	case dim == store.GroupProvider:
		return "(no provider reached)"
	case dim == store.GroupProject:
		return "(deleted project)"
	}
	return "(none)"
}

// isError is a request that failed: answered with a status of 400 or
// more, except 499, the client going away (not the gateway's failure).
func isError(status int) bool { return status >= 400 && status != 499 }

// usageData reads the summary, and the records when there are few enough,
// and folds them into series.
func (u *UI) usageData(ctx context.Context, org string, sq admin.SummaryQuery, w usageWindow, dim string) (*usageData, error) {
	sum, err := u.svc.SummarizeUsage(ctx, org, sq)
	if err != nil {
		return nil, err
	}
	d := &usageData{Window: w, GroupBy: dim}
	step := w.step()
	bucket := func(t time.Time) int {
		i := int(t.UTC().Truncate(step).Sub(w.Buckets[0]) / step)
		return min(max(i, 0), len(w.Buckets)-1)
	}
	byID := map[string]*usageSeries{}
	series := func(id string, keyID int64, keyName string) *usageSeries {
		s := byID[id]
		if s == nil {
			s = &usageSeries{ID: id, KeyID: keyID, KeyName: keyName, Label: dimLabel(dim, id, keyID, keyName),
				Cells: make([]usageCell, len(w.Buckets))}
			byID[id] = s
		}
		return s
	}
	for _, t := range sum.Data {
		at := t.Hour
		if at == nil {
			at = t.Day
		}
		if at == nil {
			continue // the summary is grouped by the interval: never
		}
		s := series(totalID(dim, t))
		c := usageCell{Requests: t.Requests, Prompt: t.PromptTokens, Completion: t.CompletionTokens,
			Priced: t.Requests - t.UnpricedRequests}
		if t.Cost != nil {
			c.Cost = *t.Cost
		}
		s.Cells[bucket(*at)].add(&c)
	}
	var requests int64
	for _, t := range sum.Data {
		requests += t.Requests
	}
	if requests <= usageDetailCap {
		if err := u.usageDetail(ctx, org, sq.UsageQuery, dim, bucket, series); err != nil {
			return nil, err
		}
		d.Detail = true
	}
	for _, s := range byID {
		for i := range s.Cells {
			s.Total.add(&s.Cells[i])
		}
		d.Total.add(&s.Total)
		d.All = append(d.All, s)
	}
	slices.SortFunc(d.All, func(a, b *usageSeries) int {
		return cmp.Or(cmp.Compare(b.Total.Requests, a.Total.Requests), cmp.Compare(a.Label, b.Label))
	})
	d.Plotted = foldSeries(d.All, len(w.Buckets))
	return d, nil
}

// totalID is a summary group's series: its id, and a key's id and name.
func totalID(dim string, t admin.UsageTotal) (string, int64, string) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch dim {
	case store.GroupKey:
		if t.KeyID != nil {
			return strconv.FormatInt(*t.KeyID, 10), *t.KeyID, str(t.Key)
		}
	case store.GroupRoute:
		return str(t.Route), 0, ""
	case store.GroupProvider:
		return str(t.Provider), 0, ""
	case store.GroupModel:
		return str(t.Model), 0, ""
	case store.GroupProject:
		return str(t.Project), 0, ""
	}
	return "", 0, ""
}

// usageDetail reads the range's records and adds their errors and
// latencies to the series. A record of a series the summary did not have
// (written between the two reads) adds a series with only those.
func (u *UI) usageDetail(ctx context.Context, org string, q admin.UsageQuery, dim string, bucket func(time.Time) int,
	series func(string, int64, string) *usageSeries) error {
	pr := admin.PageRequest{Limit: 1000}
	for read := 0; read < usageDetailCap; {
		p, err := u.svc.ListUsage(ctx, org, q, pr)
		if err != nil {
			return err
		}
		for _, r := range p.Data {
			var id string
			switch dim {
			case store.GroupKey:
				id = strconv.FormatInt(r.KeyID, 10)
			case store.GroupRoute:
				id = r.Route
			case store.GroupProvider:
				id = r.Provider
			case store.GroupModel:
				id = r.Address
			case store.GroupProject:
				id = r.Project
			}
			s := series(id, r.KeyID, "")
			c := &s.Cells[bucket(r.CreatedAt)]
			if isError(r.Status) {
				c.Errors++
			}
			c.lat = append(c.lat, r.LatencyMS)
		}
		read += len(p.Data)
		if p.NextCursor == "" {
			return nil
		}
		pr.Cursor = p.NextCursor
	}
	return nil
}

// foldSeries keeps the largest series (sorted, largest first) and folds
// the rest into one "other", so a chart draws at most usageMaxSeries
// lines, and gives each its colour class.
func foldSeries(all []*usageSeries, buckets int) []*usageSeries {
	keep := all
	var rest []*usageSeries
	if len(all) > usageMaxSeries {
		keep, rest = all[:usageMaxSeries-1], all[usageMaxSeries-1:]
	}
	out := make([]*usageSeries, 0, len(keep)+1)
	for i, s := range keep {
		s.Class = "s" + strconv.Itoa(i)
		out = append(out, s)
	}
	if len(rest) > 0 {
		o := &usageSeries{ID: "other", Label: "other (" + strconv.Itoa(len(rest)) + " more)", Class: "s-other",
			Cells: make([]usageCell, buckets)}
		for _, s := range rest {
			for i := range s.Cells {
				o.Cells[i].add(&s.Cells[i])
			}
			o.Total.add(&s.Total)
		}
		out = append(out, o)
	}
	return out
}

// usagePage is the data of usage.html.
type usagePage struct {
	Form     usageForm
	Err      *formErr
	Projects []string
	Dims     []string
	// Ranges are the quick range links.
	Ranges []usageRange
	// The rest is set when the form resolved.
	D       *usageData
	Shown   string // the range and interval in words
	Charts  []svgChart
	Rows    []usageRow
	TotalRw usageRow
	// SeriesCSV and TableCSV download exactly the charts' and the
	// table's data.
	SeriesCSV, TableCSV string
	DimTitle            string
	DetailCap           string
}

type usageRange struct {
	Label, URL string
	Active     bool
}

// usageRow is a table row, formatted.
type usageRow struct {
	Label, Class                               string
	Requests, Prompt, Completion, Tokens, Cost string
	Errors                                     string
	ErrorRate, P50, P95                        string
	HasErrors                                  bool
}

func (u *UI) usage(w http.ResponseWriter, r *request) error {
	f := usageFormOf(r)
	pg := &usagePage{Form: f, Dims: usageDims, DetailCap: count(usageDetailCap)}
	v, err := u.dataView(r, "usage", false, pg)
	if err != nil {
		return err
	}
	if pg.Projects, err = u.projectNames(r, v.Org); err != nil {
		return err
	}
	for _, rg := range []struct{ label, since string }{{"Last 24 h", ""}, {"3 days", "3d"}, {"7 days", "7d"}, {"30 days", "30d"}} {
		pg.Ranges = append(pg.Ranges, usageRange{Label: rg.label,
			URL:    link("usage", append([]string{"org", v.Org}, f.pairs("since", rg.since, "until", "", "interval", "")...)...),
			Active: f.Since == rg.since && f.Until == ""})
	}
	sq, win, err := f.resolve(u.sessions.clock.Now())
	var d *usageData
	if err == nil {
		d, err = u.usageData(r.Context(), v.Org, sq, win, f.GroupBy)
	}
	if err != nil {
		fe, ok := asFormErr(err)
		if !ok {
			return err
		}
		pg.Err = fe
		u.render(w, http.StatusUnprocessableEntity, v, "")
		return nil
	}
	pg.D = d
	pg.DimTitle = dimTitle(f.GroupBy)
	pg.Shown = usageTime(win.Since) + " to " + usageTime(win.Until) + ", by the " + win.Interval
	pg.Charts = usageCharts(d)
	for _, s := range d.All {
		pg.Rows = append(pg.Rows, usageRowOf(s.Label, s.Class, &s.Total, d.Detail))
	}
	pg.TotalRw = usageRowOf("Total", "", &d.Total, d.Detail)
	csv := func(of string) string {
		return link("usage/_csv", append([]string{"org", v.Org}, f.pairs("since", win.Since.Format(time.RFC3339Nano),
			"until", win.Until.Format(time.RFC3339Nano), "interval", win.Interval, "of", of)...)...)
	}
	pg.SeriesCSV, pg.TableCSV = csv("series"), csv("table")
	u.render(w, http.StatusOK, v, "")
	return nil
}

// dimTitle names the table's first column.
func dimTitle(dim string) string {
	switch dim {
	case "none":
		return "Requests"
	case store.GroupKey:
		return "Key"
	}
	return strings.ToUpper(dim[:1]) + dim[1:]
}

func usageRowOf(label, class string, c *usageCell, detail bool) usageRow {
	r := usageRow{Label: label, Class: class, Requests: count(c.Requests), Prompt: count(c.Prompt),
		Completion: count(c.Completion), Tokens: count(c.Tokens()), Cost: usd(c), Errors: "—", ErrorRate: "—", P50: "—", P95: "—"}
	if !detail {
		return r
	}
	r.Errors, r.HasErrors = count(c.Errors), c.Errors > 0
	if n := len(c.lat); n > 0 { // the records the errors were counted in
		r.ErrorRate = strconv.FormatFloat(100*float64(c.Errors)/float64(n), 'f', 1, 64) + " %"
	}
	if ms, ok := c.latency(0.5); ok {
		r.P50 = millis(ms)
	}
	if ms, ok := c.latency(0.95); ok {
		r.P95 = millis(ms)
	}
	return r
}

// count writes n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// millis writes a latency: ms under 10 s, else seconds.
func millis(ms int64) string {
	if ms < 10_000 {
		return count(ms) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

// usd writes a cell's cost, "—" when none of its requests was priced.
func usd(c *usageCell) string {
	if c.Priced == 0 {
		return "—"
	}
	v := float64(c.Cost) / 1e9
	if v >= 100 {
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}
