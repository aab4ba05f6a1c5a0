package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// RecordHeartbeats moves reported_at only, each host to its own time,
// over more than one PostgreSQL chunk; it skips hosts that are gone and
// keeps a later time already written (a changed report written at once
// after the heartbeat was queued), on both stores.
func TestRecordHeartbeats(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		base := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
		const n = 1003
		var beats []store.Heartbeat
		ids := make([]int64, 0, n)
		rep := store.HostReport{Discovered: fleetapi.Discovered{GPU: "1x NVIDIA L4", GPUCount: 1}, Error: "vllm exited 1"}
		var reports []store.HostReportEntry
		for i := range n {
			h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 8000, ModelName: "qwen3",
				APIKey: secret.New(fmt.Sprintf("rh-abc_%d", i)), Recipe: testRecipe("Qwen/Qwen3-8B")}
			if err := s.CreateHost(ctx, h, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, h.ID)
			reports = append(reports, store.HostReportEntry{HostID: h.ID, Applied: "0123456789abcdef", Report: rep})
			beats = append(beats, store.Heartbeat{HostID: h.ID, At: base.Add(time.Minute + time.Duration(i)*time.Millisecond)})
		}
		if err := s.RecordHostReports(ctx, reports, base); err != nil {
			t.Fatal(err)
		}
		beats = append(beats, store.Heartbeat{HostID: 999999999, At: base})
		if err := s.RecordHeartbeats(ctx, beats); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 1, 999, 1000, n - 1} {
			h, err := s.GetHost(ctx, o.ID, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if want := beats[i].At; h.ReportedAt == nil || !h.ReportedAt.Equal(want) {
				t.Fatalf("host %d: reported_at %v, want %v", i, h.ReportedAt, want)
			}
			if h.AppliedRevision != "0123456789abcdef" || h.Report.Error != "vllm exited 1" || h.Report.Discovered.GPU != "1x NVIDIA L4" {
				t.Fatalf("host %d: the heartbeat changed the report: %q %+v", i, h.AppliedRevision, h.Report)
			}
			if h.LastConfigFetch != nil {
				t.Fatalf("host %d: the heartbeat wrote last_config_fetch %v", i, h.LastConfigFetch)
			}
		}
		if err := s.RecordHeartbeats(ctx, nil); err != nil {
			t.Fatalf("no heartbeats: %v", err)
		}
		// A report written later than a queued heartbeat stays.
		later := base.Add(time.Hour)
		if err := s.RecordHostReports(ctx, reports[:1], later); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordHeartbeats(ctx, []store.Heartbeat{{HostID: ids[0], At: later.Add(-time.Second)}, {HostID: ids[1], At: later}}); err != nil {
			t.Fatal(err)
		}
		h0, _ := s.GetHost(ctx, o.ID, ids[0])
		h1, _ := s.GetHost(ctx, o.ID, ids[1])
		if !h0.ReportedAt.Equal(later) {
			t.Fatalf("an earlier heartbeat moved host 0 back: %v, want %v", h0.ReportedAt, later)
		}
		if !h1.ReportedAt.Equal(later) {
			t.Fatalf("host 1: %v, want %v", h1.ReportedAt, later)
		}
		// Sub-second times compare as times.
		for i, st := range []struct{ at, want time.Time }{
			{later.Add(500 * time.Millisecond), later.Add(500 * time.Millisecond)},
			{later.Add(10 * time.Millisecond), later.Add(500 * time.Millisecond)},
			{later.Add(time.Second), later.Add(time.Second)},
		} {
			if err := s.RecordHeartbeats(ctx, []store.Heartbeat{{HostID: ids[2], At: st.at}}); err != nil {
				t.Fatal(err)
			}
			if h, _ := s.GetHost(ctx, o.ID, ids[2]); h.ReportedAt == nil || !h.ReportedAt.Equal(st.want) {
				t.Fatalf("step %d: wrote %v: stored %v, want %v", i, st.at, h.ReportedAt, st.want)
			}
		}
	})
}
