package admin

// MaxRateLimit bounds rpm_limit and tpm_limit: a billion per minute is far
// beyond any gateway's throughput, and the bound keeps the limiter's
// per-unit interval (60s / limit) a positive number of nanoseconds.
const MaxRateLimit = 1_000_000_000

// checkRateLimit validates a requests- or tokens-per-minute limit: 0 means
// none.
func checkRateLimit(fe fieldErrors, field string, v int) {
	if v < 0 || v > MaxRateLimit {
		fe.add(field, "must be 0 (no limit) or a positive number up to 1000000000")
	}
}
