package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/store"
)

const usageCols = `created_at, org_id, project_id, key_id, address_kind, address, route, provider_id, provider_slug,
	upstream_model, status, class, attempts, latency_ms, ttft_ms, prompt_tokens, completion_tokens, stream`

// usageArgs is the number of columns in usageCols.
const usageArgs = 18

// usageRowsPerInsert bounds one multi-VALUES statement: 500 rows bind 9,000
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
	return s.tx(ctx, func(tx *sql.Tx) error {
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
					r.Latency.Milliseconds(), r.TTFT.Milliseconds(), r.PromptTokens, r.CompletionTokens, r.Stream)
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
	)
	err := sc.Scan(&u.ID, &u.CreatedAt, &u.OrgID, &u.ProjectID, &u.KeyID, &u.AddressKind, &u.Address, &u.Route,
		&u.ProviderID, &u.ProviderSlug, &u.UpstreamModel, &u.Status, &u.Class, &u.Attempts,
		&latency, &ft, &u.PromptTokens, &u.CompletionTokens, &u.Stream)
	u.CreatedAt = u.CreatedAt.UTC()
	u.Latency, u.TTFT = time.Duration(latency)*time.Millisecond, time.Duration(ft)*time.Millisecond
	return u, err
}

// ListUsage implements store.Store. Every filter combination is served by
// the (org_id, id) index walk; since also has (org_id, created_at).
func (s *DB) ListUsage(ctx context.Context, f store.UsageFilter, p store.Page) ([]store.UsageRecord, error) {
	query := `SELECT id, ` + usageCols + ` FROM usage_records WHERE org_id = ? AND id > ?`
	args := []any{f.OrgID, p.After}
	if f.ProjectID != 0 {
		query += ` AND project_id = ?`
		args = append(args, f.ProjectID)
	}
	if f.KeyID != 0 {
		query += ` AND key_id = ?`
		args = append(args, f.KeyID)
	}
	if f.Route != "" {
		query += ` AND route = ?`
		args = append(args, f.Route)
	}
	if !f.Since.IsZero() {
		// Stored times are whole microseconds, so rounding since up keeps
		// ">=" exact.
		since := f.Since.UTC()
		if t := since.Truncate(time.Microsecond); t.Before(since) {
			since = t.Add(time.Microsecond)
		}
		query += ` AND created_at >= ?`
		args = append(args, since)
	}
	return list(ctx, s, s.db, scanUsage, query+` ORDER BY id LIMIT ?`, append(args, limitOf(p))...)
}
