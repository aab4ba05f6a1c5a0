package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// procSample is what the bench reads about one process at one instant.
type procSample struct {
	cpuTicks int64 // utime + stime, in clock ticks, all threads
	rss      int64 // VmRSS, bytes
	hwm      int64 // VmHWM (peak RSS since start or the last resetPeak), bytes
}

// sampleProc reads /proc/<pid>/stat and /proc/<pid>/status. pid 0 means
// the bench process itself.
func sampleProc(pid int) (procSample, error) {
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procSample{}, err
	}
	var s procSample
	if s.cpuTicks, err = parseStatCPU(stat); err != nil {
		return procSample{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return procSample{}, err
	}
	s.rss = parseStatusKB(status, "VmRSS") * 1024
	s.hwm = parseStatusKB(status, "VmHWM") * 1024
	return s, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The second field, comm, is in parentheses and may itself contain spaces
// and parentheses, so fields are counted from the last ')'. After it come
// field 3 (state) onwards; utime and stime are fields 14 and 15 (proc(5)).
func parseStatCPU(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no ')' after comm")
	}
	f := strings.Fields(string(b[i+1:]))
	const utime, stime = 14 - 3, 15 - 3 // indexes into f, which starts at field 3
	if len(f) <= stime {
		return 0, fmt.Errorf("%d fields after comm, want more than %d", len(f), stime)
	}
	u, err := strconv.ParseInt(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseInt(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return u + s, nil
}

// parseStatusKB returns the value of a "Name:   1234 kB" line of
// /proc/<pid>/status, in kB, or 0 when the line is missing (kernel threads
// have no Vm* lines).
func parseStatusKB(b []byte, name string) int64 {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}

// resetPeak resets VmHWM to the current RSS (writing "5" to clear_refs,
// Linux 4.0+), so that a scenario's peak is its own and not an earlier
// one's. It reports whether that worked; where it does not, peaks are since
// process start, which the report says.
func resetPeak(pid int) bool {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0) == nil
}

// clockTicks returns the kernel's USER_HZ, the unit of utime and stime:
// `getconf CLK_TCK`, asked once per run. Every Linux architecture Go runs
// on uses 100, which is the fallback when getconf is missing.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
}
