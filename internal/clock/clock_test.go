package clock

import (
	"testing"
	"time"
)

func TestManualClock(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	c := NewManual(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now() = %v, want %v", c.Now(), t0)
	}
	c.Advance(time.Minute)
	if got := c.Now().Sub(t0); got != time.Minute {
		t.Fatalf("after Advance(1m) Now() = t0+%v", got)
	}
}
