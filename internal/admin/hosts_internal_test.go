package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// TestLivenessClasses: green under an hour, red over a week, amber between,
// never before the first fetch (design 002).
func TestLivenessClasses(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age  time.Duration
		want string
	}{
		{0, "green"}, {59 * time.Minute, "green"}, {time.Hour, "amber"}, {3 * 24 * time.Hour, "amber"},
		{7 * 24 * time.Hour, "amber"}, {7*24*time.Hour + time.Second, "red"}, {90 * 24 * time.Hour, "red"},
	} {
		at := now.Add(-c.age)
		l := liveness(&at, now)
		if l.Class != c.want || l.AgeSeconds == nil || *l.AgeSeconds != int64(c.age/time.Second) {
			t.Errorf("age %s: %+v, want %s", c.age, l, c.want)
		}
	}
	if l := liveness(nil, now); l.Class != "never" || l.AgeSeconds != nil {
		t.Errorf("never fetched: %+v", l)
	}
}

// The host view shows the box's fit, GPUs and kv-cache calibration as it
// reported them (issue 18), and nothing of them before a report.
func TestHostViewFitAndKVCache(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &Service{now: func() time.Time { return now }}
	h := &store.Host{ID: 4, IP: "10.0.0.4", Port: 8000, ModelName: "m", State: store.HostServing,
		Recipe: fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "m", KVCache: fleetapi.KVCacheAuto}}}
	if v := s.hostView(h, "default"); v.Fit != "" || v.GPUs != nil || v.KVCache != nil {
		t.Errorf("before any report: %+v", v)
	}
	h.ReportedAt = &now
	h.Report = store.HostReport{Fit: fleetapi.FitChecked, GPUs: []int{2, 3},
		KVCache: &fleetapi.KVCache{State: fleetapi.KVCalibrated, InitialBytes: 1 << 31, Bytes: 2358995846}}
	b, err := json.Marshal(s.hostView(h, "default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"fit":"checked"`, `"gpus":[2,3]`,
		`"kv_cache":{"state":"calibrated","initial_bytes":2147483648,"bytes":2358995846}`, `"kv_cache":"auto"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("host view lacks %s: %s", want, b)
		}
	}
}
