package sqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// BenchmarkPoolSize runs the store's hot mix (storeLoad) in bursts of 8
// concurrent operations, as a fleet polling on a schedule makes them,
// against PostgreSQL, by pool size. Besides ns/op it reports
// sessions/op (sessions opened per operation, 0 for a steady pool),
// cpu-ns/op (this process: user and system CPU) and, when PostgreSQL runs
// on this machine, pg-cpu-ns/op (the CPU of the benchmark's backends, from
// /proc). Figures are in docs/performance.md.
//
//	go test ./internal/store/sqlstore -run '^$' -bench PoolSize -benchtime 4000x
func BenchmarkPoolSize(b *testing.B) {
	for _, size := range []int{1, 2, 4, 8, 16} {
		b.Run("pool_max_conns="+strconv.Itoa(size), func(b *testing.B) {
			spec, dir, app := pgSpec(b, map[string]string{"pool_max_conns": strconv.Itoa(size)})
			db, err := sqlstore.Open(context.Background(), spec, dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			base := os.Getenv("ROLTER_TEST_POSTGRES")
			if base == "" {
				base = storetest.DefaultPostgres
			}
			mon, err := sql.Open("pgx", base)
			if err != nil {
				b.Fatal(err)
			}
			defer mon.Close()
			l := newStoreLoad(b, db)
			for range 4 { // warm the pool and its statement caches
				l.wave(b, 8, nil)
			}
			pids := backends(b, mon, app)
			sessions, cpu, pgCPU := db.SessionsOpened(), processCPU(), backendCPU(pids)
			b.ResetTimer()
			for i := 0; i < b.N; i += 8 {
				l.wave(b, min(8, b.N-i), nil)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(db.SessionsOpened()-sessions)/n, "sessions/op")
			b.ReportMetric(float64(processCPU()-cpu)/n, "cpu-ns/op")
			if pgCPU >= 0 {
				if after := backendCPU(pids); after >= 0 {
					b.ReportMetric(float64(after-pgCPU)/n, "pg-cpu-ns/op")
				}
			}
		})
	}
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU sums the user and system CPU of the PostgreSQL backends pids
// from /proc; -1 when PostgreSQL does not run on this machine (or a
// backend is gone: with a steady pool none is).
func backendCPU(pids map[int]time.Time) time.Duration {
	var total time.Duration
	for pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return -1
		}
		// Fields after the command name, which ends with the last ')':
		// utime and stime are fields 14 and 15, in clock ticks (100 Hz).
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return -1
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+st) * 10 * time.Millisecond
	}
	return total
}
