package fleet

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store/storetest"
)

// reportOf is a box's report that it runs rev for host id, with errText.
func reportOf(id int64, rev, errText string) string {
	return `{"applied":[{"host_id":` + strconv.FormatInt(id, 10) + `,"revision":"` + rev + `","error":"` + errText + `"}],` +
		`"discovered":{"gpu":"1x NVIDIA L4","gpu_count":1,"vram_gb":22.5,"disk_free_gb":300,"vllm_version":"0.11.0"}}`
}

func (d *dirFixture) report(t *testing.T, body string) {
	t.Helper()
	if code, resp, _ := d.do(t, "POST", fleetapi.ReportPath, d.key, body); code != 200 {
		t.Fatalf("report: %d %s", code, resp)
	}
}

// A report is judged on the hosts as stored, not on this replica's
// directory: a change and an apply requested through another replica
// (here: straight in the store, unannounced) are not undone by a report
// of the revision before them, which the stale directory still calls
// current.
func TestReportReadsHostsFresh(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		d := newDirFixture(t, dialect, LivenessConfig{})
		d.config(t) // the directory has h1 at its first revision
		r1 := Revision(d.host(t, d.h1.ID))
		h1 := d.host(t, d.h1.ID)
		h1.Port = 9100
		must(t, d.st.UpdateHost(ctx, h1, nil))
		must(t, d.st.RequestApply(ctx, d.org, h1.ID))
		r2 := Revision(d.host(t, d.h1.ID))

		d.report(t, reportOf(d.h1.ID, r1, ""))
		if x := d.host(t, d.h1.ID); !x.ApplyRequested || x.Applied != nil || x.AppliedRevision != r1 {
			t.Fatalf("a report of the revision before the change: apply requested %v, applied %+v, revision %s",
				x.ApplyRequested, x.Applied, x.AppliedRevision)
		}
		d.report(t, reportOf(d.h1.ID, r2, ""))
		if x := d.host(t, d.h1.ID); x.ApplyRequested || x.Applied == nil || x.Applied.Revision != r2 || x.Applied.Port != 9100 {
			t.Fatalf("a report of the current revision: apply requested %v, applied %+v", x.ApplyRequested, x.Applied)
		}
	})
}

// A report that says what is stored is written again only once the
// stored one is a liveness interval old (the agent's heartbeat), and then
// without reading the store when nothing about its hosts was announced,
// queued for the next batch of heartbeats (reported_at only; issue 23:
// one transaction per batch, not per box); the report that changed the
// hosts is remembered as written, so the first heartbeat reads nothing
// either; any change is written at once, and only a change of what a box's
// /vllm/config says is announced to the other replicas. The same report
// again, with nothing announced about hosts since, is answered without a
// store read (issue 23: the steady state costs no query).
func TestUnchangedReportNotRewritten(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		d := newDirFixture(t, dialect, LivenessConfig{Flush: time.Minute})
		var announced atomic.Int64
		d.h.cfg.HostsChanged = func(context.Context) { announced.Add(1) }
		rev := Revision(d.host(t, d.h1.ID))
		writes := func() int64 { return d.q.reports.Load() }
		reads := func() int64 { return d.q.byIP.Load() }

		d.report(t, reportOf(d.h1.ID, rev, ""))
		if writes() != 1 || announced.Load() != 1 {
			t.Fatalf("first report: %d writes, %d announcements", writes(), announced.Load())
		}
		written := d.host(t, d.h1.ID).ReportedAt
		for range 5 {
			d.advance(10 * time.Second)
			d.report(t, reportOf(d.h1.ID, rev, ""))
		}
		if writes() != 1 || announced.Load() != 1 {
			t.Fatalf("unchanged reports within the interval: %d writes, %d announcements", writes(), announced.Load())
		}
		// The first report changed the directory (applied: announced)
		// and was remembered as the hosts it wrote; the other five were
		// answered from memory.
		if n := reads(); n != 1 {
			t.Fatalf("six reports read the store %d times, want 1", n)
		}
		// A change elsewhere (a snapshot swap invalidates the directory)
		// that leaves this box's hosts as they were keeps it so.
		d.h.Invalidate()
		d.report(t, reportOf(d.h1.ID, rev, ""))
		if n := reads(); n != 1 {
			t.Fatalf("a report after an unrelated change read the store: %d reads, want 1", n)
		}
		if x := d.host(t, d.h1.ID); !x.ReportedAt.Equal(*written) {
			t.Fatalf("reported_at moved without a write: %v", x.ReportedAt)
		}
		beats := func() int64 { return d.q.beats.Load() }
		d.advance(10 * time.Second) // a minute since the write
		d.report(t, reportOf(d.h1.ID, rev, ""))
		if writes() != 1 || beats() != 0 || d.h.beats.pending() != 1 {
			t.Fatalf("an unchanged report a minute on: %d writes, %d heartbeat writes, %d queued; want it queued",
				writes(), beats(), d.h.beats.pending())
		}
		if x := d.host(t, d.h1.ID); !x.ReportedAt.Equal(*written) {
			t.Fatalf("reported_at moved before the batch: %v", x.ReportedAt)
		}
		beatAt := d.clock()
		d.advance(time.Second)
		d.h.beats.Flush(context.Background())
		if x := d.host(t, d.h1.ID); beats() != 1 || !x.ReportedAt.Equal(beatAt) || x.AppliedRevision != rev {
			t.Fatalf("the batch: %d heartbeat writes, reported_at %v, want %v", beats(), x.ReportedAt, beatAt)
		}
		if n := reads(); n != 1 {
			t.Fatalf("the heartbeat of an unchanged report read the store: %d reads, want 1", n)
		}
		d.advance(30 * time.Second)
		d.report(t, reportOf(d.h1.ID, rev, ""))
		if writes() != 1 || reads() != 1 || d.h.beats.pending() != 0 {
			t.Fatalf("the same report within a minute of its heartbeat: %d writes, %d reads, %d queued", writes(), reads(), d.h.beats.pending())
		}
		d.advance(30 * time.Second)
		d.report(t, reportOf(d.h1.ID, rev, ""))
		beatAt = d.clock()
		d.h.beats.Flush(context.Background())
		if x := d.host(t, d.h1.ID); writes() != 1 || beats() != 2 || reads() != 1 || !x.ReportedAt.Equal(beatAt) {
			t.Fatalf("the next heartbeat: %d writes, %d heartbeat writes, %d reads, reported_at %v", writes(), beats(), reads(), x.ReportedAt)
		}
		d.advance(time.Second)
		d.report(t, reportOf(d.h1.ID, rev, "vllm exited 1"))
		if writes() != 2 || announced.Load() != 1 {
			t.Fatalf("a changed report: %d writes, %d announcements", writes(), announced.Load())
		}
		if x := d.host(t, d.h1.ID); x.Report.Error != "vllm exited 1" {
			t.Fatalf("stored error %q", x.Report.Error)
		}
		// An apply requested since: the same report clears it at once.
		// The admin write invalidates the directory, as the server's
		// admin API (and another replica's announcement) does; that ends
		// answering the report from memory.
		must(t, d.st.RequestApply(context.Background(), d.org, d.h1.ID))
		d.h.Invalidate()
		d.advance(time.Second)
		d.report(t, reportOf(d.h1.ID, rev, "vllm exited 1"))
		if x := d.host(t, d.h1.ID); writes() != 3 || x.ApplyRequested {
			t.Fatalf("a report clearing an apply request: %d writes, apply requested %v", writes(), x.ApplyRequested)
		}
	})
}

// The heartbeat of an unchanged report, answered without reading the
// store, moves reported_at only: an apply request made since through
// another replica (here: straight in the store, unannounced) is not
// cleared by it, but by the first report judged on the store once the
// directory reloads (its minute) and sees the request.
func TestReportHeartbeatClearsNoApply(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		d := newDirFixture(t, dialect, LivenessConfig{Flush: time.Minute})
		rev := Revision(d.host(t, d.h1.ID))
		d.report(t, reportOf(d.h1.ID, rev, ""))
		d.advance(10 * time.Second)
		d.report(t, reportOf(d.h1.ID, rev, "")) // judged unchanged: remembered
		must(t, d.st.RequestApply(ctx, d.org, d.h1.ID))
		d.advance(50 * time.Second) // a minute since the write; the directory, loaded by the second report, is younger
		reads := d.q.byIP.Load()
		d.report(t, reportOf(d.h1.ID, rev, ""))
		d.h.beats.Flush(ctx)
		x := d.host(t, d.h1.ID)
		if !x.ApplyRequested || !x.ReportedAt.Equal(d.clock()) || d.q.byIP.Load() != reads {
			t.Fatalf("heartbeat: apply requested %v, reported_at %v (now %v), %d store reads",
				x.ApplyRequested, x.ReportedAt, d.clock(), d.q.byIP.Load()-reads)
		}
		d.h.Invalidate() // the announcement, or the directory's minute
		d.report(t, reportOf(d.h1.ID, rev, ""))
		if x := d.host(t, d.h1.ID); x.ApplyRequested {
			t.Fatal("a report judged on the store left the apply request")
		}
	})
}

// A heartbeat that lands just before the stored reported_at is an
// interval old (the agent timed it from before its last report arrived)
// is written: reported_at lags one heartbeat, not two.
func TestHeartbeatJustBeforeIntervalWritten(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		d := newDirFixture(t, dialect, LivenessConfig{Flush: time.Minute})
		rev := Revision(d.host(t, d.h1.ID))
		d.report(t, reportOf(d.h1.ID, rev, ""))
		d.advance(30 * time.Second)
		d.report(t, reportOf(d.h1.ID, rev, "")) // unchanged, within the interval: nothing written
		d.advance(29 * time.Second)             // a second short of the interval
		d.report(t, reportOf(d.h1.ID, rev, ""))
		d.h.beats.Flush(context.Background())
		if x := d.host(t, d.h1.ID); d.q.beats.Load() != 1 || !x.ReportedAt.Equal(d.clock()) {
			t.Fatalf("a heartbeat a second early: %d heartbeat writes, reported_at %v, want %v", d.q.beats.Load(), x.ReportedAt, d.clock())
		}
	})
}
