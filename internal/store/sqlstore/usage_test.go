package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// usageFixture returns n records of org 1 spread over two projects, three
// keys and three routes, one second apart from base, plus a record of org 2
// every tenth row.
func usageFixture(n int, base time.Time) []store.UsageRecord {
	// A non-UTC zone proves the store normalises before it stores.
	zone := time.FixedZone("MSK", 3*3600)
	var recs []store.UsageRecord
	for i := range n {
		r := store.UsageRecord{
			CreatedAt: base.Add(time.Duration(i) * time.Second).In(zone),
			OrgID:     1, ProjectID: int64(1 + i%2), KeyID: int64(10 + i%3),
			AddressKind: "route", Address: fmt.Sprintf("r%d", i%3), Route: fmt.Sprintf("r%d", i%3),
			ProviderID: 7, ProviderSlug: "vllm", UpstreamModel: "Qwen/Qwen3-8B",
			Status: 200, Attempts: 1, Latency: time.Duration(i) * time.Millisecond, TTFT: 3 * time.Millisecond,
			PromptTokens: i, CompletionTokens: 2 * i, Stream: i%2 == 0,
		}
		if i%3 == 2 {
			r.AddressKind, r.Address, r.Route = "provider", "vllm/Qwen/Qwen3-8B", ""
		}
		if i%10 == 9 {
			r.OrgID = 2
		}
		recs = append(recs, r)
	}
	return recs
}

// allUsage pages through ListUsage with a small page size.
func allUsage(t *testing.T, s store.Store, f store.UsageFilter) []store.UsageRecord {
	t.Helper()
	var out []store.UsageRecord
	page := store.Page{Limit: 97}
	for {
		rows, err := s.ListUsage(context.Background(), f, page)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r.ID <= page.After || (i > 0 && r.ID <= rows[i-1].ID) {
				t.Fatalf("ids out of order: %d after %d", r.ID, page.After)
			}
		}
		out = append(out, rows...)
		if len(rows) < page.Limit {
			return out
		}
		page.After = rows[len(rows)-1].ID
	}
}

func TestUsage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		base := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		// More than one multi-VALUES statement's worth, in one call.
		recs := usageFixture(1234, base)
		if err := s.InsertUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.InsertUsage(ctx, nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}

		got := allUsage(t, s, store.UsageFilter{OrgID: 1})
		var want []store.UsageRecord
		for _, r := range recs {
			if r.OrgID == 1 {
				want = append(want, r)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("org 1: %d records, want %d", len(got), len(want))
		}
		// Round trip: every field, time in UTC at microsecond precision.
		for i := range want {
			w := want[i]
			w.ID = got[i].ID
			w.CreatedAt = w.CreatedAt.UTC().Truncate(time.Microsecond)
			if !reflect.DeepEqual(got[i], w) {
				t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], w)
			}
		}
		if got[0].CreatedAt.Location() != time.UTC || got[0].CreatedAt.Nanosecond() != 123456000 {
			t.Fatalf("created_at: %v", got[0].CreatedAt)
		}

		count := func(f store.UsageFilter, keep func(store.UsageRecord) bool) {
			t.Helper()
			n := 0
			for _, r := range recs {
				if r.OrgID == f.OrgID && keep(r) {
					n++
				}
			}
			rows := allUsage(t, s, f)
			if len(rows) != n || n == 0 {
				t.Fatalf("filter %+v: %d rows, want %d (> 0)", f, len(rows), n)
			}
			for _, r := range rows {
				if !keep(r) || r.OrgID != f.OrgID {
					t.Fatalf("filter %+v let through %+v", f, r)
				}
			}
		}
		all := func(store.UsageRecord) bool { return true }
		count(store.UsageFilter{OrgID: 2}, all)
		count(store.UsageFilter{OrgID: 1, ProjectID: 2}, func(r store.UsageRecord) bool { return r.ProjectID == 2 })
		count(store.UsageFilter{OrgID: 1, KeyID: 11}, func(r store.UsageRecord) bool { return r.KeyID == 11 })
		count(store.UsageFilter{OrgID: 1, Route: "r1"}, func(r store.UsageRecord) bool { return r.Route == "r1" })
		// since is inclusive, to the microsecond stored, whatever the
		// caller's zone.
		stored := func(r store.UsageRecord) time.Time { return r.CreatedAt.Truncate(time.Microsecond) }
		since := base.Add(1000 * time.Second).Truncate(time.Microsecond)
		count(store.UsageFilter{OrgID: 1, Since: since.In(time.FixedZone("X", -5*3600))},
			func(r store.UsageRecord) bool { return !stored(r).Before(since) })
		count(store.UsageFilter{OrgID: 1, Since: since.Add(time.Nanosecond)},
			func(r store.UsageRecord) bool { return stored(r).After(since) })
		count(store.UsageFilter{OrgID: 1, ProjectID: 1, KeyID: 10, Route: "r0", Since: since},
			func(r store.UsageRecord) bool {
				return r.ProjectID == 1 && r.KeyID == 10 && r.Route == "r0" && !stored(r).Before(since)
			})
		if rows, err := s.ListUsage(ctx, store.UsageFilter{OrgID: 3}, store.Page{}); err != nil || len(rows) != 0 {
			t.Fatalf("other org: %v %v", rows, err)
		}

		// A record without a start time is stamped at insert.
		before := time.Now().Add(-time.Second)
		if err := s.InsertUsage(ctx, []store.UsageRecord{{OrgID: 3, Status: 499, Class: "client_cancelled"}}); err != nil {
			t.Fatal(err)
		}
		rows, err := s.ListUsage(ctx, store.UsageFilter{OrgID: 3}, store.Page{})
		if err != nil || len(rows) != 1 || rows[0].CreatedAt.Before(before) || rows[0].Class != "client_cancelled" {
			t.Fatalf("stamped record: %+v %v", rows, err)
		}

		// A cancelled batch stores nothing.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.InsertUsage(cctx, usageFixture(10, base)); err == nil {
			t.Fatal("insert with a cancelled context succeeded")
		}
		if n := len(allUsage(t, s, store.UsageFilter{OrgID: 1})); n != len(want) {
			t.Fatalf("after cancelled insert: %d records, want %d", n, len(want))
		}
	})
}

// BenchmarkInsertUsage reports the cost of one 500-record batch, the
// recorder's default.
func BenchmarkInsertUsage(b *testing.B) {
	for _, d := range storetest.Dialects {
		b.Run(d, func(b *testing.B) {
			s := storetest.Open(b, d, nil)
			recs := usageFixture(500, time.Now())
			b.ResetTimer()
			for range b.N {
				if err := s.InsertUsage(context.Background(), recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestUsageText stores strings a client or upstream chose, NUL and invalid
// UTF-8 included: PostgreSQL refuses both in text (SQLSTATE 22021), so
// every string is stored with them replaced by U+FFFD, alike on both
// stores, and the batch goes in whole.
func TestUsageText(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		recs := usageFixture(3, time.Now())
		bad := &recs[1]
		bad.OrgID = 5
		bad.Address, bad.Route = "\x00", "r\xc3"
		bad.ProviderSlug, bad.UpstreamModel, bad.Class = "v\x00llm", "Qwen\xff\xfe\x00/8B", "x\xed\xa0\x80"
		if err := s.InsertUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if n := len(allUsage(t, s, store.UsageFilter{OrgID: 1})); n != 2 {
			t.Fatalf("org 1: %d records, want 2", n)
		}
		got := allUsage(t, s, store.UsageFilter{OrgID: 5})
		if len(got) != 1 {
			t.Fatalf("org 5: %d records, want 1", len(got))
		}
		g := got[0]
		want := []string{"\uFFFD", "r\uFFFD", "v\uFFFDllm", "Qwen\uFFFD\uFFFD/8B", "x\uFFFD"}
		if have := []string{g.Address, g.Route, g.ProviderSlug, g.UpstreamModel, g.Class}; !reflect.DeepEqual(have, want) {
			t.Fatalf("stored strings %q, want %q", have, want)
		}
		// Other writes go through the same rule.
		o := &store.Org{Name: "team\x00", Description: "d\xff"}
		if err := s.CreateOrg(ctx, o); err != nil {
			t.Fatal(err)
		}
		back, err := s.GetOrg(ctx, "team\uFFFD")
		if err != nil || back.Description != "d\uFFFD" {
			t.Fatalf("org with bad bytes: %+v %v", back, err)
		}
	})
}

// TestUsageRejected: a row the database refuses for its values fails its
// batch with store.ErrRejected, which tells it apart from an outage, and
// stores nothing of the batch.
func TestUsageRejected(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		storetest.RefuseUsageStatus(t, s, 1000)
		recs := usageFixture(3, time.Now())
		recs[2].Status = 5000
		err := s.InsertUsage(ctx, recs)
		if !errors.Is(err, store.ErrRejected) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("refused row: %v, want store.ErrRejected", err)
		}
		if n := len(allUsage(t, s, store.UsageFilter{OrgID: 1})); n != 0 {
			t.Fatalf("%d records of a refused batch stored", n)
		}
		if err := s.InsertUsage(ctx, recs[:2]); err != nil {
			t.Fatalf("the other rows: %v", err)
		}
		s.Close()
		if err := s.InsertUsage(ctx, recs[:2]); err == nil || errors.Is(err, store.ErrRejected) {
			t.Fatalf("closed store: %v, want an error that is not store.ErrRejected", err)
		}
	})
}
