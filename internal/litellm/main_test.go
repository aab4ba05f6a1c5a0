package litellm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the probe
// starts some, and must wait for every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
