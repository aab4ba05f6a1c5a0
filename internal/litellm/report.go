package litellm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReportHeader introduces the slug report: one line per provider whose
// slug the backfill adjusted, fields separated by ", ", a field holding a
// comma or a quote double-quoted as in CSV (encoding/csv reads the lines
// with TrimLeadingSpace). provider_id is "-" in a dry run.
const ReportHeader = "slug adjustments (org, provider_id, name, base_slug, final_slug):"

// Print writes what the plan does (or, after Apply, did) to w: one line
// per org, project, provider and route, the slug report, and a summary.
// Key secrets are never printed; a provider shows how many keys it has.
func (plan *Plan) Print(w io.Writer, dryRun bool) {
	verb := "created"
	if dryRun {
		verb = "would create"
	}
	if plan.NewOrg {
		fmt.Fprintf(w, "%s org %s\n", verb, plan.Org)
	}
	if plan.NewProject {
		fmt.Fprintf(w, "%s project %s/%s\n", verb, plan.Org, plan.Project)
	}
	var newP, oldP, newR, oldR int
	for _, p := range plan.Providers {
		keys := "no key"
		if !p.Key.IsZero() {
			keys = "1 key"
		}
		if p.Exists {
			oldP++
			fmt.Fprintf(w, "provider %s exists (same kind, base_url and key): reused\n", p.Slug)
			continue
		}
		newP++
		fmt.Fprintf(w, "%s provider %s: kind %s, base_url %s, %s\n", verb, p.Slug, p.Kind, p.BaseURL, keys)
	}
	for _, r := range plan.Routes {
		if r.Exists {
			oldR++
			fmt.Fprintf(w, "route %s exists: left unchanged\n", r.Model)
			continue
		}
		newR++
		ts := make([]string, len(r.Targets))
		for i, t := range r.Targets {
			ts[i] = fmt.Sprintf("%s/%s weight %d", t.Provider.Slug, t.UpstreamModel, t.Weight)
		}
		fmt.Fprintf(w, "%s route %s: %s\n", verb, r.Model, strings.Join(ts, ", "))
	}
	if adj := plan.Adjustments(); len(adj) > 0 {
		fmt.Fprintln(w, ReportHeader)
		for _, a := range adj {
			id := "-"
			if a.ID != 0 {
				id = strconv.FormatInt(a.ID, 10)
			}
			fmt.Fprintln(w, strings.Join([]string{csvField(plan.Org), id, csvField(a.Name), a.BaseSlug, a.Slug}, ", "))
		}
	}
	if dryRun {
		fmt.Fprintf(w, "dry run: would create %d providers, %d routes; would skip %d providers, %d routes (already present); nothing written\n", newP, newR, oldP, oldR)
		return
	}
	fmt.Fprintf(w, "created %d providers, %d routes; skipped %d providers, %d routes (already present)\n", newP, newR, oldP, oldR)
}

// Adjustments are the new providers the backfill moved off their base
// slug, in creation order.
func (plan *Plan) Adjustments() []*Provider {
	var out []*Provider
	for _, p := range plan.Providers {
		if p.Adjusted() {
			out = append(out, p)
		}
	}
	return out
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\r\n") || strings.TrimSpace(s) != s {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
