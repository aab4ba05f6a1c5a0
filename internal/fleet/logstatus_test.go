package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// recordedReadings keeps the readings the controller feeds.
type recordedReadings struct {
	mu  sync.Mutex
	all []readiness.Reading
}

func (r *recordedReadings) Feed(_ int64, rd readiness.Reading) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rd)
	return true
}

func (r *recordedReadings) Status(int64) (readiness.Status, bool) { return readiness.Status{}, false }

func (r *recordedReadings) last(t *testing.T) readiness.Reading {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		t.Fatal("no reading fed")
	}
	return r.all[len(r.all)-1]
}

// TestControllerLogsSlugAndFeedsStatus (issue 20 §1): the first
// "registered" line names the host's provider by the slug RegisterHost
// gave it, even when "host-<id>" was taken; each reading fed to the
// readiness cache carries the HTTP status of the answer that decided it
// (200, 503, and 0 once nothing listens), on both probe paths.
func TestControllerLogsSlugAndFeedsStatus(t *testing.T) {
	var d net.Dialer
	for _, path := range []struct {
		name     string
		interval time.Duration
	}{{"probeconn", 10 * time.Second}, {"client", 2 * time.Second}} {
		t.Run(path.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db string) {
				ctx := context.Background()
				st := storetest.Open(t, db, nil)
				org, _, b, h := boxHost(t, st, vllm("--max-model-len", "32768"))
				b.health.Store(true)
				// An operator's provider holds "host-<id>": the slug is not derivable.
				taken := "host-" + strconv.FormatInt(h.ID, 10)
				must(t, st.CreateProvider(ctx, &store.Provider{OrgID: org.ID, Slug: taken, Name: "taken", Kind: store.KindOpenAI,
					BaseURL: "http://127.0.0.1:1/v1", MetadataSource: store.MetadataConfigured, Models: []string{"m"}}))

				var logs syncBuffer
				rec := &recordedReadings{}
				c := NewController(st, ControllerConfig{Interval: path.interval, Client: &http.Client{}, Dial: d.DialContext,
					FailAfter: 3, Readings: rec}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
				c.Sweep(ctx)
				x, err := st.GetHost(ctx, org.ID, h.ID)
				must(t, err)
				if x.State != store.HostServing || x.ProviderSlug == "" || x.ProviderSlug == taken {
					t.Fatalf("registered: state %s, slug %q", x.State, x.ProviderSlug)
				}
				var line string
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, `msg="fleet host serving: registered"`) {
						line = l
					}
				}
				if !strings.Contains(line, "provider="+x.ProviderSlug+" ") {
					t.Errorf("registered line %q lacks provider=%s", line, x.ProviderSlug)
				}

				c.Sweep(ctx)
				if s := rec.last(t).Status; s != 200 {
					t.Errorf("healthy reading: status %d, want 200", s)
				}
				b.health.Store(false)
				c.Sweep(ctx)
				if r := rec.last(t); r.Status != 503 || r.Health == nil {
					t.Errorf("503 reading: status %d, health %v", r.Status, r.Health)
				}
				b.srv.Close()
				c.Sweep(ctx)
				if r := rec.last(t); r.Status != 0 || !readiness.Refused(r.Health) {
					t.Errorf("refused reading: status %d, health %v", r.Status, r.Health)
				}
			})
		})
	}
}
