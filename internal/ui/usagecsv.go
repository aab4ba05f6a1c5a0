package ui

import (
	"encoding/csv"
	"mime"
	"net/http"
	"strconv"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// usageCSV downloads exactly what the Usage page shows for the same query:
// ?of=series the charts' points (a row per bucket and plotted series,
// "other" included), ?of=table the table (a row per series, then the
// total). The page's links carry absolute since and until, so a download
// made later holds the same rows.
func (u *UI) usageCSV(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "usage", false)
	if err != nil {
		return err
	}
	of := r.FormValue("of")
	if of != "series" && of != "table" {
		return admin.Invalid(map[string]string{"of": "takes series (the charts' points) or table (the table's rows)"})
	}
	f := usageFormOf(r)
	sq, win, err := f.resolve(u.sessions.clock.Now())
	if err != nil {
		return err
	}
	d, err := u.usageData(r.Context(), v.Org, sq, win, f.GroupBy)
	if err != nil {
		return err
	}
	name := "usage-" + v.Org + "-" + win.Since.Format("20060102T1504Z") + "-by-" + f.GroupBy + "-" + of + ".csv"
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	cw := csv.NewWriter(w)
	if of == "series" {
		_ = cw.Write(append(append([]string{"bucket_start"}, csvDimHeader(f.GroupBy)...),
			"requests", "prompt_tokens", "completion_tokens", "errors", "latency_p50_ms", "latency_p95_ms"))
		for i, at := range win.Buckets {
			for _, s := range d.Plotted {
				c := &s.Cells[i]
				_ = cw.Write(append(append([]string{at.Format("2006-01-02T15:04:05Z")}, csvDim(f.GroupBy, s)...),
					itoa(c.Requests), itoa(c.Prompt), itoa(c.Completion), csvDetail(d, c, "errors"),
					csvDetail(d, c, "p50"), csvDetail(d, c, "p95")))
			}
		}
	} else {
		_ = cw.Write(append(csvDimHeader(f.GroupBy), "requests", "prompt_tokens", "completion_tokens", "cost_usd",
			"errors", "error_rate_percent", "latency_p50_ms", "latency_p95_ms"))
		row := func(dim []string, c *usageCell) {
			_ = cw.Write(append(dim, itoa(c.Requests), itoa(c.Prompt), itoa(c.Completion), csvCost(c),
				csvDetail(d, c, "errors"), csvDetail(d, c, "rate"), csvDetail(d, c, "p50"), csvDetail(d, c, "p95")))
		}
		for _, s := range d.All {
			row(csvDim(f.GroupBy, s), &s.Total)
		}
		total := []string{"Total"}
		if f.GroupBy == store.GroupKey {
			total = []string{"", "Total"}
		}
		row(total, &d.Total)
	}
	cw.Flush()
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// csvDimHeader names the series columns: a key has its id and its name.
func csvDimHeader(dim string) []string {
	switch dim {
	case "none":
		return []string{"series"}
	case store.GroupKey:
		return []string{"key_id", "key"}
	}
	return []string{dim}
}

// csvDim is a series as the page names it ("other" included).
func csvDim(dim string, s *usageSeries) []string {
	if dim == store.GroupKey {
		if s.Class == "s-other" {
			return []string{"", s.Label}
		}
		id := itoa(s.KeyID)
		if s.ID != "" {
			id = s.ID
		}
		return []string{id, csvText(s.KeyName)}
	}
	return []string{csvText(s.Label)}
}

// csvText keeps a spreadsheet from reading a name as a formula.
func csvText(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

func csvCost(c *usageCell) string {
	if c.Priced == 0 {
		return ""
	}
	return c.Cost.USD()
}

// csvDetail is an error count, error rate or latency percentile of c,
// empty when they were not computed (or, for latency, without requests).
func csvDetail(d *usageData, c *usageCell, what string) string {
	if !d.Detail {
		return ""
	}
	switch what {
	case "errors":
		return itoa(c.Errors)
	case "rate":
		if len(c.lat) == 0 {
			return ""
		}
		return strconv.FormatFloat(100*float64(c.Errors)/float64(len(c.lat)), 'f', 1, 64)
	case "p50", "p95":
		p := 0.5
		if what == "p95" {
			p = 0.95
		}
		if ms, ok := c.latency(p); ok {
			return itoa(ms)
		}
	}
	return ""
}
