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

// SkippedHeader introduces the list of skipped entries, one line each
// as "index, model_name, reason", quoted as the slug report is.
const SkippedHeader = "skipped entries (model_list index, model_name, reason):"

// UnsetHeader introduces the environment variables a dry run found unset,
// one line each: "NAME: the fields that read it".
const UnsetHeader = "environment variables not set (a real import needs them):"

// Print writes what the plan does (or, after Apply, did) to w: one line
// per org, project, provider, group and route, the wildcard addresses,
// probe suggestions, skipped entries, unset variables, the slug report,
// and a summary. Key secrets are never printed; a provider shows how many
// keys it has.
func (plan *Plan) Print(w io.Writer, dryRun bool) {
	verb, update := "created", "updated"
	if dryRun {
		verb, update = "would create", "would update"
	}
	if plan.NewOrg {
		fmt.Fprintf(w, "%s org %s\n", verb, plan.Org)
	}
	if plan.NewProject {
		fmt.Fprintf(w, "%s project %s/%s\n", verb, plan.Org, plan.Project)
	}
	var providers, groups, routes tally
	for _, p := range plan.Providers {
		switch {
		case !p.Exists:
			providers.created++
			fmt.Fprintf(w, "%s provider %s: kind %s, base_url %s, %s\n", verb, p.Slug, p.Kind, p.base(), p.keys())
		case !p.Imported:
			providers.present++
			fmt.Fprintf(w, "provider %s exists (same kind, base_url and key): reused\n", p.Slug)
		case len(p.Changes) > 0:
			providers.updated++
			fmt.Fprintf(w, "%s provider %s: %s\n", update, p.Slug, strings.Join(p.Changes, "; "))
		default:
			providers.present++
			fmt.Fprintf(w, "provider %s exists (imported before): unchanged\n", p.Slug)
		}
		for _, k := range p.Kept {
			fmt.Fprintf(w, "provider %s keeps %s\n", p.Slug, k)
		}
	}
	for _, g := range plan.Groups {
		if groups.add(w, g.Exists, "group", g.Slug) {
			fmt.Fprintf(w, "%s group %s for %s: %s (clients ask for %s/<model>)\n", verb, g.Slug, g.Pattern, weights(g.Members), g.Slug)
		}
	}
	for _, r := range plan.Routes {
		if routes.add(w, r.Exists, "route", r.Model) {
			fmt.Fprintf(w, "%s route %s: %s%s%s\n", verb, r.Model, weights(r.Targets), r.Limits.phrase(), r.fallbackPhrase())
		}
	}
	for _, a := range plan.Addresses {
		fmt.Fprintf(w, "model_list[%d] (model_name %s): %s; its models are reachable as %s/<model>\n", a.Entry, quoted(a.ModelName), a.Why, a.Provider.Slug)
	}
	for _, s := range plan.Suggestions {
		fmt.Fprintln(w, s)
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(w, n)
	}
	if len(plan.Skipped) > 0 {
		fmt.Fprintln(w, SkippedHeader)
		for _, s := range plan.Skipped {
			fmt.Fprintln(w, strings.Join([]string{strconv.Itoa(s.Index), csvField(s.ModelName), csvField(s.Reason)}, ", "))
		}
	}
	if len(plan.Unset) > 0 {
		fmt.Fprintln(w, UnsetHeader)
		for _, u := range plan.Unset {
			fmt.Fprintf(w, "%s: %s\n", u.Name, strings.Join(u.Fields, ", "))
		}
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
	created := fmt.Sprintf("%d providers, %d routes", providers.created, routes.created)
	if groups.created > 0 {
		created += fmt.Sprintf(", %d groups", groups.created)
	}
	present := fmt.Sprintf("%d providers, %d routes", providers.present, routes.present)
	if groups.present > 0 {
		present += fmt.Sprintf(", %d groups", groups.present)
	}
	var updated, notImported string
	if providers.updated > 0 {
		updated = fmt.Sprintf("%s %d providers; ", update, providers.updated)
	}
	if len(plan.Skipped) > 0 {
		notImported = fmt.Sprintf("; %d %s not imported", len(plan.Skipped), plural(len(plan.Skipped), "entry", "entries"))
	}
	if dryRun {
		fmt.Fprintf(w, "dry run: would create %s; %swould skip %s (already present)%s; nothing written\n", created, updated, present, notImported)
		return
	}
	fmt.Fprintf(w, "created %s; %sskipped %s (already present)%s\n", created, updated, present, notImported)
}

// tally counts what the plan does with one kind of entry.
type tally struct{ created, updated, present int }

// add counts a group or route and reports whether the plan creates it;
// one that exists is left unchanged, and says so here.
func (t *tally) add(w io.Writer, exists bool, kind, name string) bool {
	if exists {
		t.present++
		fmt.Fprintf(w, "%s %s exists: left unchanged\n", kind, name)
		return false
	}
	t.created++
	return true
}

// weights is how the report shows a route's targets or a group's members:
// each provider's address for the model (a member passes the requested
// model through) with its weight.
func weights(ts []Target) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		addr := t.Provider.Slug
		if t.UpstreamModel != "" {
			addr += "/" + t.UpstreamModel
		}
		s[i] = fmt.Sprintf("%s weight %d", addr, t.Weight)
	}
	return strings.Join(s, ", ")
}

// base is how the report shows a provider's base URL.
func (p *Provider) base() string {
	if p.BaseUnset {
		return "from " + envPrefix + p.BaseRef + " (not set)"
	}
	return p.BaseURL
}

// keys is how the report shows a provider's key: how many, never which.
func (p *Provider) keys() string {
	switch {
	case p.KeyUnset:
		return "1 key from " + envPrefix + p.KeyRef + " (not set)"
	case p.Key.IsZero():
		return "no key"
	}
	return "1 key"
}

// phrase is how the report shows a route's limits.
func (l Limits) phrase() string {
	var s []string
	if l.RPM > 0 {
		s = append(s, fmt.Sprintf("rpm_limit %d", l.RPM))
	}
	if l.TPM > 0 {
		s = append(s, fmt.Sprintf("tpm_limit %d", l.TPM))
	}
	if len(s) == 0 {
		return ""
	}
	return "; " + strings.Join(s, ", ")
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
