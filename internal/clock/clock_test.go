package clock

import (
	"context"
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

func TestWait(t *testing.T) {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	if !Wait(context.Background(), c) {
		t.Fatal("Wait with a tick ready = false, want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Wait(ctx, c) {
		t.Fatal("Wait after ctx ended, no tick = true, want false")
	}
}
