package admin

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

// groupDims are the group_by values, in the order the API documents.
var groupDims = []string{store.GroupKey, store.GroupProject, store.GroupRoute, store.GroupProvider, store.GroupModel, store.GroupDay, store.GroupHour}

// CodeTooManyGroups refuses a summary with more groups than its limit.
const CodeTooManyGroups = "too_many_groups"

// Summary bounds: the groups one call returns (limit, default 1000, at
// most 10000). More groups than the limit is refused, never cut silently.
const (
	defaultGroups = 1000
	maxGroups     = 10_000
)

// UsageSummary is the answer of GET .../usage/summary. Currency is the
// gateway's one currency.
type UsageSummary struct {
	Currency string       `json:"currency"`
	GroupBy  []string     `json:"group_by"`
	Data     []UsageTotal `json:"data"`
}

// UsageTotal is one group: the dimensions grouped by (absent otherwise)
// and the sums. Cost sums the priced requests and is null when none of the
// group's requests was priced; UnpricedRequests counts the requests served
// by a provider without a price, whose tokens are in the token sums but
// have no cost.
type UsageTotal struct {
	KeyID            *int64        `json:"key_id,omitempty"`
	Key              *string       `json:"key,omitempty"`
	Project          *string       `json:"project,omitempty"`
	Route            *string       `json:"route,omitempty"`
	Provider         *string       `json:"provider,omitempty"`
	Model            *string       `json:"model,omitempty"`
	Day              *time.Time    `json:"day,omitempty"`
	Hour             *time.Time    `json:"hour,omitempty"`
	Requests         int64         `json:"requests"`
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	Cost             *money.Amount `json:"cost"`
	UnpricedRequests int64         `json:"unpriced_requests"`
}

func usageTotal(g store.UsageGroup, groupBy []string) UsageTotal {
	t := UsageTotal{Requests: g.Requests, PromptTokens: g.PromptTokens, CompletionTokens: g.CompletionTokens, UnpricedRequests: g.Unpriced}
	if g.Priced > 0 {
		t.Cost = &g.Cost
	}
	for _, d := range groupBy {
		switch d {
		case store.GroupKey:
			t.KeyID, t.Key = &g.KeyID, &g.KeyName
		case store.GroupProject:
			t.Project = &g.ProjectName
		case store.GroupRoute:
			t.Route = &g.Route
		case store.GroupProvider:
			t.Provider = &g.Provider
		case store.GroupModel:
			t.Model = &g.Model
		case store.GroupDay:
			t.Day = &g.Bucket
		case store.GroupHour:
			t.Hour = &g.Bucket
		}
	}
	return t
}

// summaryTimeout bounds one usage summary query.
const summaryTimeout = 30 * time.Second

// CodeSummaryTooSlow: a usage summary ran past summaryTimeout.
const CodeSummaryTooSlow = "summary_too_slow"

// SummaryQuery asks for usage sums: the records q matches, grouped by
// GroupBy (any of key, project, route, provider, model and one of day or
// hour; none: one total), at most Limit groups (0: 1000; at most 10000).
type SummaryQuery struct {
	UsageQuery
	GroupBy []string
	Limit   int
}

// SummarizeUsage sums the org's usage in one store query. More groups than
// the limit is refused (ErrInvalid, CodeTooManyGroups), never cut
// silently; a query running past summaryTimeout is refused too.
func (s *Service) SummarizeUsage(ctx context.Context, org string, q SummaryQuery) (UsageSummary, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return UsageSummary{}, err
	}
	fe := fieldErrors{}
	groupBy, limit := q.check(fe)
	f, _, err := s.usageFilter(ctx, o, q.UsageQuery, fe)
	if err != nil {
		return UsageSummary{}, err
	}
	// One summary may not hold the store for long, whatever range it asks
	// for: the database stops it.
	qctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	groups, err := s.st.SummarizeUsage(qctx, f, groupBy, limit+1)
	if err != nil && qctx.Err() != nil && ctx.Err() == nil {
		return UsageSummary{}, &Error{Kind: ErrInvalid, Code: CodeSummaryTooSlow,
			Message: "the summary took longer than " + summaryTimeout.String() + "; narrow since/until or the filters",
			Fields:  map[string]string{"since": "narrow the range"}}
	}
	if err != nil {
		return UsageSummary{}, fromStore(err, "usage")
	}
	if len(groups) > limit {
		return UsageSummary{}, &Error{Kind: ErrInvalid, Code: CodeTooManyGroups,
			Message: "more than " + strconv.Itoa(limit) + " groups match; narrow the filters (since, until, key, ...), group by fewer dimensions or by day rather than hour, or raise limit (at most " + strconv.Itoa(maxGroups) + ")",
			Fields:  map[string]string{"group_by": "yields more than " + strconv.Itoa(limit) + " groups"}}
	}
	out := UsageSummary{Currency: "USD", GroupBy: groupBy, Data: make([]UsageTotal, 0, len(groups))}
	for _, g := range groups {
		out.Data = append(out.Data, usageTotal(g, groupBy))
	}
	return out, nil
}

// check validates the grouping and the limit into fe.
func (q SummaryQuery) check(fe fieldErrors) (groupBy []string, limit int) {
	groupBy = []string{}
	for _, d := range q.GroupBy {
		switch {
		case !slices.Contains(groupDims, d):
			fe.add("group_by", "takes a comma-separated list of %s", strings.Join(groupDims, ", "))
		case slices.Contains(groupBy, d):
			fe.add("group_by", "names %s twice", d)
		default:
			groupBy = append(groupBy, d)
		}
	}
	if slices.Contains(groupBy, store.GroupDay) && slices.Contains(groupBy, store.GroupHour) {
		fe.add("group_by", "takes day or hour, not both")
	}
	limit = q.Limit
	switch {
	case limit == 0:
		limit = defaultGroups
	case limit < 1 || limit > maxGroups:
		fe.add("limit", "%s", GroupLimitRule)
	}
	return groupBy, limit
}

// GroupLimitRule is the message of a bad number of summary groups,
// exported for a layer that parses it from text (?limit=) and refuses what
// is not a number the same way.
var GroupLimitRule = "must be a number of groups from 1 to " + strconv.Itoa(maxGroups)

// Problems names, by query parameter, what is wrong with q, the usage
// filters as UsageQuery.Problems and the grouping and limit, without
// reading the store; empty when nothing is.
func (q SummaryQuery) Problems() map[string]string {
	fe := fieldErrors(q.UsageQuery.Problems())
	q.check(fe)
	return fe
}
