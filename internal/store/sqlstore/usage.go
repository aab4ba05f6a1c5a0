package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/store"
)

const usageCols = `created_at, org_id, project_id, key_id, address_kind, address, route, provider_id, provider_slug,
	upstream_model, status, class, attempts, latency_ms, ttft_ms, prompt_tokens, completion_tokens, stream, cost_nano, tier, fallback`

// usageArgs is the number of columns in usageCols.
const usageArgs = 21

// usageRowsPerInsert bounds one multi-VALUES statement: 500 rows bind 10,500
// parameters, well inside SQLite's 32,766 and PostgreSQL's 65,535.
const usageRowsPerInsert = 500

// InsertUsage implements store.Store. Rows go in as multi-VALUES inserts
// inside one transaction: one round trip per 500 rows rather than per row,
// which is what makes a batch cheap on PostgreSQL. Strings are stored
// through text; a row the database still refuses fails the whole batch
// with store.ErrRejected, and the caller may retry the rows one by one.
func (s *DB) InsertUsage(ctx context.Context, recs []store.UsageRecord) error {
	if len(recs) == 0 {
		return nil
	}
	t := now()
	args := make([]any, 0, min(len(recs), usageRowsPerInsert)*usageArgs)
	return s.tx(ctx, func(tx querier) error {
		for rest := recs; len(rest) > 0; {
			chunk := rest[:min(len(rest), usageRowsPerInsert)]
			rest = rest[len(chunk):]
			args = args[:0]
			for i := range chunk {
				r := &chunk[i]
				at := t
				if !r.CreatedAt.IsZero() {
					// UTC, microseconds: SQLite compares the text form, so
					// every row must share one offset and one format.
					at = r.CreatedAt.UTC().Truncate(time.Microsecond)
				}
				// The strings come from clients and upstreams: text keeps
				// one bad byte from failing every row of the batch.
				args = append(args, at, r.OrgID, r.ProjectID, r.KeyID, text(r.AddressKind), text(r.Address), text(r.Route),
					r.ProviderID, text(r.ProviderSlug), text(r.UpstreamModel), r.Status, text(r.Class), r.Attempts,
					r.Latency.Milliseconds(), r.TTFT.Milliseconds(), r.PromptTokens, r.CompletionTokens, r.Stream, costArg(r.Cost), r.Tier, text(r.Fallback))
			}
			if _, err := tx.ExecContext(ctx, s.q(usageInsert(len(chunk))), args...); err != nil {
				return s.classify(err, "")
			}
		}
		return nil
	})
}

// usageInsert returns the INSERT for n rows, with "?" placeholders.
func usageInsert(n int) string {
	row := "(?" + strings.Repeat(", ?", usageArgs-1) + ")"
	var b strings.Builder
	b.Grow(len(usageCols) + 40 + n*(len(row)+2))
	b.WriteString("INSERT INTO usage_records (" + usageCols + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

func scanUsage(sc interface{ Scan(...any) error }) (store.UsageRecord, error) {
	var (
		u           store.UsageRecord
		latency, ft int64
		cost        sql.NullInt64
	)
	err := sc.Scan(&u.ID, &u.CreatedAt, &u.OrgID, &u.ProjectID, &u.KeyID, &u.AddressKind, &u.Address, &u.Route,
		&u.ProviderID, &u.ProviderSlug, &u.UpstreamModel, &u.Status, &u.Class, &u.Attempts,
		&latency, &ft, &u.PromptTokens, &u.CompletionTokens, &u.Stream, &cost, &u.Tier, &u.Fallback)
	if cost.Valid {
		c := money.Amount(cost.Int64)
		u.Cost = &c
	}
	u.CreatedAt = u.CreatedAt.UTC()
	u.Latency, u.TTFT = time.Duration(latency)*time.Millisecond, time.Duration(ft)*time.Millisecond
	return u, err
}

// ListUsage implements store.Store. Every filter combination is served by
// the (org_id, id) index walk; since also has (org_id, created_at).
func (s *DB) ListUsage(ctx context.Context, f store.UsageFilter, p store.Page) ([]store.UsageRecord, error) {
	where, args := usageWhere(f)
	query := `SELECT id, ` + usageCols + ` FROM usage_records WHERE ` + where + ` AND id > ?`
	return list(ctx, s, s.qr, scanUsage, query+` ORDER BY id LIMIT ?`, append(args, p.After, limitOf(p))...)
}

// usageWhere is the condition and arguments that select f's records.
func usageWhere(f store.UsageFilter) (string, []any) {
	where, args := `org_id = ?`, []any{f.OrgID}
	if f.ProjectID != 0 {
		where += ` AND project_id = ?`
		args = append(args, f.ProjectID)
	}
	if f.KeyID != 0 {
		where += ` AND key_id = ?`
		args = append(args, f.KeyID)
	}
	if f.KeyName != "" {
		// Key ids are global, so the org condition keeps another org's
		// key of the same name out.
		where += ` AND key_id IN (SELECT vk.id FROM virtual_keys vk JOIN projects pj ON pj.id = vk.project_id
			WHERE pj.org_id = ? AND vk.name = ?)`
		args = append(args, f.OrgID, f.KeyName)
	}
	for _, c := range []struct{ col, v string }{{"route", f.Route}, {"provider_slug", f.Provider}, {"address", f.Model}} {
		if c.v != "" {
			where += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	if !f.Since.IsZero() {
		where += ` AND created_at >= ?`
		args = append(args, ceilMicro(f.Since))
	}
	if !f.Until.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ceilMicro(f.Until))
	}
	return where, args
}

// ceilMicro rounds t up to a whole microsecond in UTC: stored times are
// whole microseconds, so ">=" and "<" against the rounded value are exact.
func ceilMicro(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

func costArg(c *money.Amount) any {
	if c == nil {
		return nil
	}
	return int64(*c)
}

// groupCols maps summary dimensions to their column expressions; the
// buckets are text "YYYY-MM-DD HH:MM:SS" in UTC on both dialects.
func (s *DB) groupCol(dim string) (string, bool) {
	pg := s.dialect == dialectPostgres
	switch dim {
	case store.GroupKey:
		return "key_id", true
	case store.GroupProject:
		return "project_id", true
	case store.GroupRoute:
		return "route", true
	case store.GroupProvider:
		return "provider_slug", true
	case store.GroupModel:
		return "address", true
	case store.GroupDay:
		if pg {
			return `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD 00:00:00')`, true
		}
		return `strftime('%Y-%m-%d 00:00:00', created_at)`, true
	case store.GroupHour:
		if pg {
			return `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:00:00')`, true
		}
		return `strftime('%Y-%m-%d %H:00:00', created_at)`, true
	}
	return "", false
}

// SummarizeUsage implements store.Store. The sums are one GROUP BY in the
// database over the filtered rows (the same indexes as ListUsage, plus
// (key_id, created_at) and (project_id, created_at)); key and project
// names are joined onto the groups afterwards, not onto every row.
func (s *DB) SummarizeUsage(ctx context.Context, f store.UsageFilter, groupBy []string, limit int) ([]store.UsageGroup, error) {
	where, args := usageWhere(f)
	var dims, order []string
	bucket := false
	for i, d := range groupBy {
		col, ok := s.groupCol(d)
		if !ok {
			return nil, fmt.Errorf("%w: unknown usage dimension %q", store.ErrRejected, d)
		}
		alias := fmt.Sprintf("d%d", i)
		dims = append(dims, col+` AS `+alias)
		if d == store.GroupDay || d == store.GroupHour {
			if bucket {
				return nil, fmt.Errorf("%w: group by day or hour, not both", store.ErrRejected)
			}
			bucket = true
			order = append([]string{"g." + alias}, order...)
		} else {
			order = append(order, "g."+alias)
		}
	}
	inner := `SELECT ` + strings.Join(append(dims, `COUNT(*) AS n`,
		`CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS pt`,
		`CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS ct`,
		`CAST(COALESCE(SUM(cost_nano), 0) AS BIGINT) AS cost`,
		`COUNT(cost_nano) AS priced`), ", ") + ` FROM usage_records WHERE ` + where
	if len(dims) > 0 {
		var pos []string
		for i := range dims {
			pos = append(pos, fmt.Sprintf("d%d", i))
		}
		inner += ` GROUP BY ` + strings.Join(pos, ", ")
	}
	outer := `SELECT g.*`
	joins := ""
	keyAt, projAt := slices.Index(groupBy, store.GroupKey), slices.Index(groupBy, store.GroupProject)
	if keyAt >= 0 {
		outer += `, COALESCE(vk.name, '')`
		joins += fmt.Sprintf(` LEFT JOIN virtual_keys vk ON vk.id = g.d%d`, keyAt)
	}
	if projAt >= 0 {
		outer += `, COALESCE(pj.name, '')`
		joins += fmt.Sprintf(` LEFT JOIN projects pj ON pj.id = g.d%d`, projAt)
	}
	query := outer + ` FROM (` + inner + `) g` + joins
	if len(order) > 0 {
		query += ` ORDER BY ` + strings.Join(order, ", ")
	}
	rows, err := s.qr.QueryContext(ctx, s.q(query+` LIMIT ?`), textArgs(append(args, limit))...)
	if err != nil {
		return nil, s.classify(err, "")
	}
	defer rows.Close()
	var out []store.UsageGroup
	for rows.Next() {
		var (
			g      store.UsageGroup
			vals   = make([]any, len(groupBy))
			bucket string
			cost   int64
		)
		for i, d := range groupBy {
			switch d {
			case store.GroupKey:
				vals[i] = &g.KeyID
			case store.GroupProject:
				vals[i] = &g.ProjectID
			case store.GroupRoute:
				vals[i] = &g.Route
			case store.GroupProvider:
				vals[i] = &g.Provider
			case store.GroupModel:
				vals[i] = &g.Model
			default:
				vals[i] = &bucket
			}
		}
		vals = append(vals, &g.Requests, &g.PromptTokens, &g.CompletionTokens, &cost, &g.Priced)
		if keyAt >= 0 {
			vals = append(vals, &g.KeyName)
		}
		if projAt >= 0 {
			vals = append(vals, &g.ProjectName)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, s.classify(err, "")
		}
		if bucket != "" {
			if g.Bucket, err = time.ParseInLocation(time.DateTime, bucket, time.UTC); err != nil {
				return nil, fmt.Errorf("store: usage bucket %q: %w", bucket, err)
			}
		}
		g.Cost, g.Unpriced = money.Amount(cost), g.Requests-g.Priced
		out = append(out, g)
	}
	return out, s.classify(rows.Err(), "")
}

// SpentSince implements store.Store, on the (key_id, created_at) or
// (project_id, created_at) index.
func (s *DB) SpentSince(ctx context.Context, keyID, projectID int64, since time.Time) (money.Amount, error) {
	col, id := "key_id", keyID
	if keyID == 0 {
		col, id = "project_id", projectID
	}
	var v int64
	err := s.qr.QueryRowContext(ctx, s.q(`SELECT CAST(COALESCE(SUM(cost_nano), 0) AS BIGINT) FROM usage_records
		WHERE `+col+` = ? AND created_at >= ?`), id, ceilMicro(since)).Scan(&v)
	if err != nil {
		return 0, s.classify(err, "")
	}
	return money.Amount(v), nil
}
