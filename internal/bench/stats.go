package bench

import (
	"slices"
	"time"
)

// sample is one request as the load generator saw it.
type sample struct {
	latency time.Duration // from the (scheduled) send to the last byte
	ttfe    time.Duration // to the first complete SSE event; 0 when not a stream
	err     string        // empty on success
}

// dist is a latency distribution in milliseconds.
type dist struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value with at least p% of the values at or below it.
// It returns 0 for an empty slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// rank = ceil(p/100 * n), computed in integers to avoid float edges
	// (p is given to 0.1%).
	n := len(sorted)
	rank := (int(p*10)*n + 999) / 1000
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// distOf summarises durations; it sorts ds in place.
func distOf(ds []time.Duration) dist {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return dist{P50: ms(percentile(ds, 50)), P90: ms(percentile(ds, 90)),
		P99: ms(percentile(ds, 99)), Max: ms(percentile(ds, 100))}
}
