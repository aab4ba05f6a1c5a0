package netguard

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDialRefusesLinkLocal: whatever name resolved to it, a link-local or
// metadata address is refused before connecting; other addresses pass.
func TestDialRefusesLinkLocal(t *testing.T) {
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:80", "[::ffff:169.254.169.254]:80", "100.100.100.200:80", "[fd00:ec2::254]:80"} {
		if err := Control("tcp", addr, nil); err == nil {
			t.Errorf("%s allowed", addr)
		}
	}
	for _, addr := range []string{"10.0.0.5:8000", "127.0.0.1:1", "[2001:db8::1]:80", "192.168.1.1:80"} {
		if err := Control("tcp", addr, nil); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	// Through the real dialer: refused at once, without a connect attempt
	// (which would hang on the unroutable address until the timeout).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Dialer(false).DialContext(ctx, "tcp", "169.254.169.254:80")
	if err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Fatalf("dial: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the refusal waited for a connect: %s", time.Since(start))
	}
	if Dialer(true).Control != nil {
		t.Fatal("the opt-in still guards")
	}
}
