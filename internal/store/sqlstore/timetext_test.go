package sqlstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestRouteTimesAsDriverReads checks that the route timestamps a load
// reads (as text on SQLite, parsed by the store) are those the driver
// reads from the same columns, in UTC, to the microsecond, on both stores,
// for a route just written and for timestamps written in other zones and
// precisions.
func TestRouteTimesAsDriverReads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		org := mustOrg(t, s, "acme")
		proj := mustProject(t, s, org.ID, "web")
		prov := mustProvider(t, s, org.ID, "p1", "sk-1")
		r := &store.Route{ProjectID: proj.ID, Model: "m", Strategy: "weighted",
			Targets: []store.Target{{ProviderID: prov.ID, UpstreamModel: "u", Weight: 1}}}
		if err := s.CreateRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
		q := func(query string) string {
			if d != "postgres" {
				return query
			}
			for n := 1; strings.Contains(query, "?"); n++ {
				query = strings.Replace(query, "?", "$"+strconv.Itoa(n), 1)
			}
			return query
		}
		berlin := time.FixedZone("CET", 3600)
		stamps := []time.Time{
			{}, // as written by CreateRoute
			time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 12, 2, 4, 5, 6, 123000, berlin),
			time.Date(1999, 12, 31, 23, 0, 0, 120000000, time.FixedZone("", -(9*3600+30*60))),
			time.Date(2030, 6, 15, 12, 0, 0, 999999000, time.UTC),
		}
		for _, ts := range stamps {
			if !ts.IsZero() {
				if _, err := s.SQL().ExecContext(ctx, q("UPDATE routes SET created_at = ?, updated_at = ? WHERE id = ?"), ts, ts.Add(time.Microsecond), r.ID); err != nil {
					t.Fatal(err)
				}
			}
			var created, updated time.Time
			if err := s.SQL().QueryRowContext(ctx, q("SELECT created_at, updated_at FROM routes WHERE id = ?"), r.ID).Scan(&created, &updated); err != nil {
				t.Fatal(err)
			}
			st, _, err := s.LoadAt(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := st.Routes[0]
			if !got.CreatedAt.Equal(created) || !got.UpdatedAt.Equal(updated) {
				t.Fatalf("stamp %v: loaded %v, %v; driver reads %v, %v", ts, got.CreatedAt, got.UpdatedAt, created, updated)
			}
			if got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
				t.Fatalf("stamp %v: loaded times not in UTC: %v, %v", ts, got.CreatedAt, got.UpdatedAt)
			}
			if !ts.IsZero() && !got.CreatedAt.Equal(ts) {
				t.Fatalf("stamp %v: loaded %v", ts, got.CreatedAt)
			}
			one, err := s.GetRoute(ctx, proj.ID, "m")
			if err != nil {
				t.Fatal(err)
			}
			if one.CreatedAt != got.CreatedAt || one.UpdatedAt != got.UpdatedAt {
				t.Fatalf("stamp %v: GetRoute %v, %v; load %v, %v", ts, one.CreatedAt, one.UpdatedAt, got.CreatedAt, got.UpdatedAt)
			}
		}
	})
}
