package admin

import (
	"context"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// UsageView is one usage record as the API shows it: the project by name,
// the provider by slug, durations in milliseconds.
type UsageView struct {
	ID               int64     `json:"id"`
	CreatedAt        time.Time `json:"created_at"`
	Project          string    `json:"project"`
	KeyID            int64     `json:"key_id"`
	AddressKind      string    `json:"address_kind"`
	Address          string    `json:"address"`
	Route            string    `json:"route"`
	Provider         string    `json:"provider"`
	UpstreamModel    string    `json:"upstream_model"`
	Status           int       `json:"status"`
	Class            string    `json:"class"`
	Attempts         int       `json:"attempts"`
	LatencyMS        int64     `json:"latency_ms"`
	TTFTMS           int64     `json:"ttft_ms"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	Stream           bool      `json:"stream"`
	// Tier is the priority of the route target that served the request;
	// Fallback the fallback route that served it instead of Route ("" for
	// none) (issue 19).
	Tier     int    `json:"tier"`
	Fallback string `json:"fallback"`
	// Cost in USD; null when the provider that served the request has no
	// price.
	Cost *money.Amount `json:"cost"`
}

func usageView(u store.UsageRecord, project string) UsageView {
	return UsageView{ID: u.ID, CreatedAt: u.CreatedAt, Project: project, KeyID: u.KeyID,
		AddressKind: u.AddressKind, Address: u.Address, Route: u.Route, Provider: u.ProviderSlug,
		UpstreamModel: u.UpstreamModel, Status: u.Status, Class: u.Class, Attempts: u.Attempts,
		LatencyMS: u.Latency.Milliseconds(), TTFTMS: u.TTFT.Milliseconds(),
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Stream: u.Stream, Cost: u.Cost,
		Tier: u.Tier, Fallback: u.Fallback}
}

// UsageQuery filters usage records; an empty field matches everything.
// Values are written as the API's query parameters take them: Key is a
// virtual key id or name, Since and Until RFC 3339 times or dates (UTC).
type UsageQuery struct {
	Project, Key, Route, Provider, Model, Since, Until string
}

// check validates the query into f, adding malformed values to fe by
// parameter name. The project, a name, is resolved by the caller.
func (q UsageQuery) check(f *store.UsageFilter, fe fieldErrors) {
	if q.Project != "" {
		checkName(fe, "project", q.Project)
	}
	if v := q.Key; v != "" {
		// A key is named by id or by name; a name matches every key of
		// the org (or project) that has it, revoked ones included.
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n < 1 {
				fe.add("key", "must be a virtual key id (a positive integer) or name")
			}
			f.KeyID = n
		} else if len(v) > 200 {
			fe.add("key", "must be a virtual key id or name (at most 200 characters)")
		} else {
			f.KeyName = v
		}
	}
	if v := q.Route; v != "" {
		checkModelName(fe, "route", v)
		f.Route = v
	}
	if v := q.Provider; v != "" {
		checkModelName(fe, "provider", v)
		f.Provider = v
	}
	if v := q.Model; v != "" {
		checkModelName(fe, "model", v)
		f.Model = v
	}
	f.Since = usageTime(fe, "since", q.Since)
	f.Until = usageTime(fe, "until", q.Until)
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		fe.add("until", "must be after since")
	}
}

// Problems names, by query parameter, what is wrong with q, as ListUsage
// and SummarizeUsage report it but without reading the store (a project
// that does not exist is not a problem here); empty when nothing is.
func (q UsageQuery) Problems() map[string]string {
	fe := fieldErrors{}
	q.check(&store.UsageFilter{}, fe)
	return fe
}

// usageFilter checks the query and resolves its project in org o.
func (s *Service) usageFilter(ctx context.Context, o *store.Org, q UsageQuery, fe fieldErrors) (store.UsageFilter, *store.Project, error) {
	f := store.UsageFilter{OrgID: o.ID}
	q.check(&f, fe)
	if err := fe.err(); err != nil {
		return f, nil, err
	}
	if q.Project == "" {
		return f, nil, nil
	}
	pj, err := s.st.GetProject(ctx, o.ID, q.Project)
	if err != nil {
		return f, nil, fromStore(err, "project "+quote(q.Project)+" in org "+quote(o.Name))
	}
	f.ProjectID = pj.ID
	return f, pj, nil
}

// usageTime reads an RFC 3339 time or a date (midnight UTC).
func usageTime(fe fieldErrors, name, v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t
	}
	fe.add(name, "must be an RFC 3339 time, e.g. 2025-01-31T00:00:00Z, or a date, e.g. 2025-01-31 (UTC)")
	return time.Time{}
}

// projectNames maps the project ids of rows to names. It reads the org's
// projects a page at a time and stops as soon as every id is named, so a
// usage page costs one project query in all but very large orgs. A
// project that no longer exists is shown with an empty name.
func (s *Service) projectNames(ctx context.Context, orgID int64, rows []store.UsageRecord) (map[int64]string, error) {
	names := map[int64]string{}
	want := 0
	for _, r := range rows {
		if _, ok := names[r.ProjectID]; !ok {
			names[r.ProjectID] = ""
			want++
		}
	}
	page := store.Page{Limit: maxLimit}
	for want > 0 {
		pjs, err := s.st.ListProjects(ctx, orgID, page)
		if err != nil {
			return nil, fromStore(err, "projects")
		}
		for _, p := range pjs {
			if name, ok := names[p.ID]; ok && name == "" {
				names[p.ID] = p.Name
				want--
			}
		}
		if len(pjs) < page.Limit {
			break
		}
		page.After = pjs[len(pjs)-1].ID
	}
	return names, nil
}

// ListUsage lists the org's usage records oldest first, filtered by q. A
// malformed filter or page is ErrInvalid naming every bad field; a
// project that does not exist is ErrNotFound.
func (s *Service) ListUsage(ctx context.Context, org string, q UsageQuery, pr PageRequest) (Page[UsageView], error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return Page[UsageView]{}, err
	}
	fe := fieldErrors{}
	page, limit := pr.check(fe)
	f, pj, err := s.usageFilter(ctx, o, q, fe)
	if err != nil {
		return Page[UsageView]{}, err
	}
	var names map[int64]string
	if pj != nil {
		names = map[int64]string{pj.ID: pj.Name}
	}
	rows, err := s.st.ListUsage(ctx, f, page)
	if err != nil {
		return Page[UsageView]{}, fromStore(err, "usage")
	}
	if names == nil {
		if names, err = s.projectNames(ctx, o.ID, rows[:min(len(rows), limit)]); err != nil {
			return Page[UsageView]{}, err
		}
	}
	return paginate(rows, limit, func(u store.UsageRecord) int64 { return u.ID },
		func(u store.UsageRecord) UsageView { return usageView(u, names[u.ProjectID]) }), nil
}
