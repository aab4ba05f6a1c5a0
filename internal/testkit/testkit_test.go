package testkit

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records failures instead of stopping.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Eventually(t, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestAssertNoSecrets(t *testing.T) {
	r := &recorder{TB: t}
	AssertNoSecrets(r, "log", "key=sk-live-1 and sk-other", "sk-live-1", "sk-absent", "")
	if len(r.errors) != 1 {
		t.Fatalf("errors %q, want one naming sk-live-1", r.errors)
	}
	AssertNoSecrets(r, "log", "clean", "sk-live-1")
	if len(r.errors) != 1 {
		t.Fatalf("a clean text reported: %q", r.errors)
	}
}
