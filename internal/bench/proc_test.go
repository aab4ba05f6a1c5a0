package bench

import (
	"os"
	"runtime"
	"testing"
)

// A real /proc/<pid>/stat line whose comm holds spaces and parentheses, the
// case that breaks naive splitting on spaces.
const statLine = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 1500 250 0 0 20 0 12 0 987654 1234567890 2345 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestParseStatCPU(t *testing.T) {
	got, err := parseStatCPU([]byte(statLine))
	if err != nil || got != 1750 {
		t.Fatalf("parseStatCPU = %d, %v; want 1500+250", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u s"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\trolter\nVmPeak:\t  900000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n"
	for name, want := range map[string]int64{"VmHWM": 51234, "VmRSS": 40960, "VmSwap": 0, "Vm": 0} {
		if got := parseStatusKB([]byte(status), name); got != want {
			t.Errorf("parseStatusKB(%s) = %d, want %d", name, got, want)
		}
	}
}

// The parsers must agree with the running kernel's format, not only with
// the samples above.
func TestSampleSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux only")
	}
	s, err := sampleProc(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.rss <= 0 || s.hwm < s.rss || s.cpuTicks < 0 {
		t.Fatalf("implausible sample %+v", s)
	}
	if _, err := sampleProc(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if clockTicks() <= 0 {
		t.Fatal("clockTicks <= 0")
	}
}
