package adminapi

import (
	"encoding/csv"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// usageParams are the query parameters GET .../usage accepts. Anything else
// is refused: a misspelt filter must not silently return everything.
var usageParams = []string{"project", "key", "route", "provider", "model", "since", "until", "limit", "cursor"}

// summaryParams are the parameters of GET .../usage/summary: the usage
// filters, group_by, format and limit.
var summaryParams = []string{"project", "key", "route", "provider", "model", "since", "until", "group_by", "format", "limit"}

// problems collects what is wrong with a request's query parameters, by
// name, before the Service is called; the first problem found with a
// parameter is the one reported.
type problems map[string]string

func (p problems) add(name, problem string) {
	if _, ok := p[name]; !ok {
		p[name] = problem
	}
}

// merge adds the problems in more that p does not name yet.
func (p problems) merge(more map[string]string) {
	for name, problem := range more {
		p.add(name, problem)
	}
}

// usageQuery reads the usage query parameters, adding to pb those the
// endpoint does not take (allowed), repeats and empty values.
func usageQuery(q url.Values, allowed []string, pb problems) admin.UsageQuery {
	for name, vs := range q {
		switch {
		case !slices.Contains(allowed, name):
			pb.add(name, "is not a parameter here; use "+strings.Join(allowed, ", "))
		case len(vs) > 1:
			pb.add(name, "must be given at most once")
		case vs[0] == "" && name != "limit" && name != "cursor":
			pb.add(name, "must not be empty; leave it out to match everything")
		}
	}
	return admin.UsageQuery{Project: q.Get("project"), Key: q.Get("key"), Route: q.Get("route"), Provider: q.Get("provider"),
		Model: q.Get("model"), Since: q.Get("since"), Until: q.Get("until")}
}

// listUsage serves GET /orgs/{org}/usage. A bad parameter is a 400 naming
// every bad parameter, the unknown ones with the malformed values.
func (h *Handler) listUsage(w http.ResponseWriter, r *http.Request) error {
	pb := problems{}
	q := usageQuery(r.URL.Query(), usageParams, pb)
	pr, err := pageOf(r)
	if ae, ok := err.(*admin.Error); ok {
		maps.Copy(pb, ae.Fields)
	}
	if len(pb) > 0 {
		pb.merge(q.Problems())
		pb.merge(pr.Problems())
		return admin.Invalid(pb)
	}
	return ok(w, r, func() (admin.Page[admin.UsageView], error) {
		return h.svc.ListUsage(r.Context(), r.PathValue("org"), q, pr)
	})
}

// usageSummary serves GET /orgs/{org}/usage/summary: token and cost sums
// of the org's usage, filtered like the record list, grouped by any of
// key, project, route, provider, model and one of day or hour, as JSON or
// (format=csv) CSV. The sums are computed by the store in one query.
func (h *Handler) usageSummary(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	pb := problems{}
	sq := admin.SummaryQuery{UsageQuery: usageQuery(q, summaryParams, pb)}
	if v := q.Get("group_by"); v != "" {
		for _, d := range strings.Split(v, ",") {
			sq.GroupBy = append(sq.GroupBy, strings.TrimSpace(d))
		}
	}
	format := q.Get("format")
	if format != "" && format != "json" && format != "csv" {
		pb.add("format", `must be "json" or "csv"`)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			pb.add("limit", admin.GroupLimitRule)
		}
		sq.Limit = n
	}
	if len(pb) > 0 {
		pb.merge(sq.Problems())
		return admin.Invalid(pb)
	}
	out, err := h.svc.SummarizeUsage(r.Context(), r.PathValue("org"), sq)
	if err != nil {
		return err
	}
	if format == "csv" {
		writeUsageCSV(w, out)
		return nil
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// writeUsageCSV writes the summary as CSV with a header row: the grouped
// dimensions, then requests, prompt_tokens, completion_tokens, cost_usd
// (empty when unpriced) and unpriced_requests.
func writeUsageCSV(w http.ResponseWriter, s admin.UsageSummary) {
	var header []string
	for _, d := range s.GroupBy {
		if d == store.GroupKey {
			header = append(header, "key_id")
		}
		header = append(header, d)
	}
	header = append(header, "requests", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_requests")
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage.csv"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.Write(header)
	for _, t := range s.Data {
		var row []string
		str := func(p *string) {
			if p != nil {
				row = append(row, csvCell(*p))
			}
		}
		if t.KeyID != nil {
			row = append(row, strconv.FormatInt(*t.KeyID, 10))
		}
		for _, d := range s.GroupBy {
			switch d {
			case store.GroupKey:
				str(t.Key)
			case store.GroupProject:
				str(t.Project)
			case store.GroupRoute:
				str(t.Route)
			case store.GroupProvider:
				str(t.Provider)
			case store.GroupModel:
				str(t.Model)
			case store.GroupDay:
				row = append(row, t.Day.Format(time.RFC3339))
			case store.GroupHour:
				row = append(row, t.Hour.Format(time.RFC3339))
			}
		}
		cost := ""
		if t.Cost != nil {
			cost = t.Cost.USD()
		}
		row = append(row, strconv.FormatInt(t.Requests, 10), strconv.FormatInt(t.PromptTokens, 10),
			strconv.FormatInt(t.CompletionTokens, 10), cost, strconv.FormatInt(t.UnpricedRequests, 10))
		_ = cw.Write(row)
	}
	cw.Flush()
}

// csvCell keeps a spreadsheet from running a cell as a formula: model
// strings come from clients.
func csvCell(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
