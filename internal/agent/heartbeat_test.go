package agent

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// A box whose state does not change reports once, then only fetches, each
// fetch asking the gateway to close its connection (no report follows it
// on that connection); a change of the configuration (here an apply
// request for the revision it runs, which the gateway waits to see
// acknowledged) is reported at the fetch that brought it.
func TestAgentReportsOnlyChanges(t *testing.T) {
	e := newEnv(t)
	// The free disk space moves at every look (by 0.3 GB): it is sent,
	// but is no change.
	var looks atomic.Uint64
	e.diskFree = func(string) (uint64, error) { return 500*gib + looks.Add(1)*3*gib/10, nil }
	fs := newFleetServer(t)
	port := freePort(t)
	as := hfAssignment(41, port)
	fs.set(as)
	e.start(e.config(fs.url()))
	e.waitRun(port)
	testkit.Eventually(t, "a report of the running revision", func() bool {
		ap, _, ok := fs.applied(41)
		return ok && ap.Revision == fleetapi.Revision(as) && ap.Error == ""
	})

	// Settled: what the first reports learn (the vLLM version, a KV-cache
	// reading) is reported; then five fetches with no report.
	var settledF, settledR int
	testkit.Eventually(t, "five fetches without a report", func() bool {
		f, r := fs.counts()
		if r != settledR {
			settledF, settledR = f, r
		}
		return f >= settledF+5
	})
	f0, r0 := fs.counts()
	fs.mu.Lock()
	c0 := fs.closing
	fs.mu.Unlock()
	testkit.Eventually(t, "20 more fetches", func() bool {
		f, _ := fs.counts()
		return f >= f0+20
	})
	f1, r1 := fs.counts()
	fs.mu.Lock()
	c1 := fs.closing
	fs.mu.Unlock()
	if r1 != r0 {
		t.Fatalf("%d reports over %d fetches of an unchanged box", r1-r0, f1-f0)
	}
	if c1-c0 < f1-f0-(r1-r0)-1 {
		t.Fatalf("%d of %d fetches asked to close their connection, want all but those a report followed", c1-c0, f1-f0)
	}

	fs.mu.Lock()
	fs.cfg.Assignments[0].Apply = true // cleared by the next report
	fs.mu.Unlock()
	testkit.Eventually(t, "the apply request acknowledged by a report", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return !fs.cfg.Assignments[0].Apply
	})
}

// An unchanged report goes out again once the heartbeat is due, and the
// fetch before it keeps its connection for it.
func TestAgentReportHeartbeat(t *testing.T) {
	e := newEnv(t)
	e.reportEvery = 300 * time.Millisecond
	fs := newFleetServer(t)
	e.start(e.config(fs.url()))
	testkit.Eventually(t, "a first report", func() bool {
		_, n := fs.counts()
		return n >= 1
	})
	_, r0 := fs.counts()
	testkit.Eventually(t, "three heartbeats", func() bool {
		_, n := fs.counts()
		return n >= r0+3
	})

	a := &Agent{reportEvery: time.Minute}
	now := time.Now()
	for _, c := range []struct {
		name   string
		sent   []byte
		sentAt time.Time
		want   bool
	}{
		{"nothing accepted yet", nil, time.Time{}, true},
		{"just sent", []byte("{}"), now, false},
		{"under a minute", []byte("{}"), now.Add(-59 * time.Second), false},
		{"a minute", []byte("{}"), now.Add(-time.Minute), true},
		{"sent in the future (clock stepped back)", []byte("{}"), now.Add(time.Hour), true},
	} {
		a.sent, a.sentAt = c.sent, c.sentAt
		if got := a.reportDue(now); got != c.want {
			t.Errorf("%s: reportDue %v, want %v", c.name, got, c.want)
		}
	}
}
