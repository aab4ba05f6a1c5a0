package defaults

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	zero, neg, set := time.Duration(0), -1.5, 7
	Set(&zero, time.Second)
	Set(&neg, 2.5)
	Set(&set, 9)
	if zero != time.Second || neg != 2.5 || set != 7 {
		t.Fatalf("got %v, %v, %v; want 1s, 2.5, 7", zero, neg, set)
	}
}
