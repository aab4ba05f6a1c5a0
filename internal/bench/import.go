package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/store/sqlstore"
)

// The import scenario (issue 21): `rolter import` of a generated rolter
// config file of importRoutes routes over importProviders providers into
// an empty SQLite store, timed from start to exit. It is what
// `serve --config` and `rolter apply` run too (admin.Service.Apply).
const (
	importScenario  = "import"
	importRoutes    = 10000
	importProviders = 1000
)

// ImportResult is the import scenario's run.
type ImportResult struct {
	Routes    int `json:"routes"`
	Providers int `json:"providers"`
	// Entries counts as the apply bound does (admin.Desired.Entries): the
	// org, the providers and their keys, the project, the routes and
	// their targets.
	Entries int     `json:"entries"`
	FileMB  float64 `json:"file_mb"`
	// WallS is from the start of `rolter import` to its exit; CPUS its
	// user and system time.
	WallS   float64 `json:"wall_s"`
	CPUS    float64 `json:"cpu_s"`
	PeakRSS int64   `json:"peak_rss_bytes"`
}

// runImport is the import scenario.
func (b *run) runImport(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "rolter-bench-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "import.yaml")
	res := ImportResult{Routes: importRoutes, Providers: importProviders}
	if res.Entries, err = writeImportFile(file, importRoutes, importProviders); err != nil {
		return err
	}
	if fi, err := os.Stat(file); err == nil {
		res.FileMB = float64(fi.Size()) / (1 << 20)
	}
	fmt.Fprintf(b.opts.Progress, "import: %d routes over %d providers (%d entries, %.1f MB) into an empty SQLite store\n",
		res.Routes, res.Providers, res.Entries, res.FileMB)
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, b.opts.Exe, "import", "--data-dir", data, "--log-level", "error", file)
	cmd.Env = childEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rolter import: %w", err)
	}
	// The peak is the child's own VmHWM, read until it exits: wait4's
	// ru_maxrss would also count the bench's RSS at the fork, which the
	// routes scenario before this one makes hundreds of MB.
	peak := watchPeak(cmd.Process.Pid)
	err = cmd.Wait()
	res.WallS = time.Since(start).Seconds()
	res.PeakRSS = peak()
	if err != nil {
		return fmt.Errorf("rolter import: %w: %s", err, tailOf(out.Bytes(), 2048))
	}
	if ps := cmd.ProcessState; ps != nil {
		res.CPUS = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	if err := checkImported(ctx, data, importRoutes); err != nil {
		return err
	}
	b.rep.Import = &res
	fmt.Fprintf(b.opts.Progress, "import: %.2fs wall, %.2fs CPU, peak RSS %s MB\n", res.WallS, res.CPUS, mb(res.PeakRSS))
	return nil
}

// writeImportFile writes a rolter config file of one org with providers
// providers, one key each, and one project of routes routes; route i
// targets provider i mod providers and, every other route, the next one
// too. It answers the file's entries.
func writeImportFile(path string, routes, providers int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "orgs:\n  - name: %s\n    providers:\n", orgName)
	for i := range providers {
		fmt.Fprintf(w, "      - name: bench-import-%05d\n        kind: vllm\n        base_url: http://10.%d.%d.%d:8000/v1\n        keys:\n          - secret: sk-bench-import-%05d\n",
			i, i>>16&255, i>>8&255, i&255, i)
	}
	fmt.Fprintf(w, "    projects:\n      - name: %s\n        routes:\n", projectName)
	entries := 1 + 2*providers + 1 + routes
	for i := range routes {
		fmt.Fprintf(w, "          - model: bench-import-model-%06d\n            targets:\n", i)
		for j := range 1 + (i+1)%2 {
			fmt.Fprintf(w, "              - provider: bench-import-%05d\n                upstream_model: org/model-%06d\n", (i+j)%providers, i)
			entries++
		}
	}
	if err := w.Flush(); err != nil {
		return 0, errors.Join(err, f.Close())
	}
	return entries, f.Close()
}

// checkImported makes sure the store in dataDir holds routes routes: an
// import that wrote less has not done the work it was timed for.
func checkImported(ctx context.Context, dataDir string, routes int) error {
	db, err := sqlstore.Open(ctx, "sqlite", dataDir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM routes").Scan(&n); err != nil {
		return err
	}
	if n != routes {
		return fmt.Errorf("rolter import: the store holds %d routes, want %d", n, routes)
	}
	return nil
}

// tailOf is the last max bytes of b.
func tailOf(b []byte, max int) string {
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// watchPeak reads pid's VmHWM every 10 ms until the returned function is
// called (after the process exited), which returns the last value read, in
// bytes. A peak reached in the last 10 ms of the process's life is missed.
func watchPeak(pid int) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		path := "/proc/" + strconv.Itoa(pid) + "/status"
		for {
			if b, err := os.ReadFile(path); err == nil {
				if kb := parseStatusKB(b, "VmHWM"); kb<<10 > peak.Load() {
					peak.Store(kb << 10)
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
