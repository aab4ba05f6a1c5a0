// Package testkit holds the helpers that tests of several packages share:
// waiting on a condition, checking that no secret leaked into a text, a
// shared log buffer, and the test Redis.
// It is imported by tests only.
package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// EventuallyTimeout is how long Eventually waits: generous, so that a
// loaded 2-core machine does not fail a test that would pass.
const EventuallyTimeout = 30 * time.Second

// Eventually polls cond until it holds, and fails t naming what it waited
// for when EventuallyTimeout passes first. It waits on a condition, never
// on a fixed time.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(EventuallyTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// AssertNoSecrets reports an error on t for each of secrets that s
// contains; what names s (output, log, response) in the message.
func AssertNoSecrets(t testing.TB, what, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			t.Errorf("%s contains the secret %q:\n%s", what, sec, s)
		}
	}
}

// Buffer is a log destination that the code under test and the test may
// share: writes and reads are serialised.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Cap is the memory the buffer holds, for tests that measure the heap
// and subtract their own logs.
func (s *Buffer) Cap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Cap()
}
