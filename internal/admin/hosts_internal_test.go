package admin

import (
	"testing"
	"time"
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
