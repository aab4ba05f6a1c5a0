package readiness

import (
	"testing"
	"time"
)

// TestProbeIntervalIsJittered: probe rounds are spread over Interval ±10%,
// so providers added together do not probe in lockstep (reliability
// scenario 15).
func TestProbeIntervalIsJittered(t *testing.T) {
	c, _ := newTestCache(t, Config{Interval: 10 * time.Second})
	lo, hi := 9*time.Second, 11*time.Second
	seen := map[time.Duration]bool{}
	minD, maxD := hi, lo
	for range 1000 {
		d := c.jitter()
		if d < lo || d > hi {
			t.Fatalf("jitter %v outside [%v, %v]", d, lo, hi)
		}
		seen[d] = true
		minD, maxD = min(minD, d), max(maxD, d)
	}
	if len(seen) < 900 || minD > 9500*time.Millisecond || maxD < 10500*time.Millisecond {
		t.Fatalf("jitter not spread: %d distinct values in [%v, %v]", len(seen), minD, maxD)
	}
}
