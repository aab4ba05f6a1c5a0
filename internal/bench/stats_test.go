package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	for _, c := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", []time.Duration{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50},
		{"p90 of 1..100", hundred, 90, 90},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 is the max", hundred, 100, 100},
		{"p50 of four rounds up the rank", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p99 of four is the max", []time.Duration{1, 2, 3, 4}, 99, 4},
		{"p99.9 of 1..100", hundred, 99.9, 100},
	} {
		if got := percentile(c.sorted, c.p); got != c.want {
			t.Errorf("%s: percentile(p%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

func TestDistOfSortsAndConverts(t *testing.T) {
	d := distOf([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 1500 * time.Microsecond})
	if d.P50 != 1.5 || d.P90 != 3 || d.P99 != 3 || d.Max != 3 {
		t.Fatalf("distOf = %+v", d)
	}
}
