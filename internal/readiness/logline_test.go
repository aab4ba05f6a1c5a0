package readiness

import (
	"context"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// TestReadinessChangeLines: a provider's readiness changes log one line
// each, naming it by org and slug (never by its number), with the reason's
// class when it goes down and the HTTP status of the probe's answer
// (upstream_status; 0 for a refused connection); the probe's credential
// never appears.
func TestReadinessChangeLines(t *testing.T) {
	e := newEngine(t)
	e.set("/health", 200, "")
	c, logs := newTestCache(t, Config{FailAfter: 1})
	c.Sync([]Provider{{ID: 4242, Kind: store.KindVLLM, BaseURL: e.url() + "/v1", Credential: secretKey, Org: "acme", Slug: "gpu-a"}})
	c.ProbeAll(context.Background())
	e.set("/health", 503, "")
	c.ProbeAll(context.Background())
	e.set("/health", 200, "")
	c.ProbeAll(context.Background())

	var down, up string
	for _, l := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(l, `msg="metadata: provider not ready"`):
			down = l
		case strings.Contains(l, `msg="metadata: provider ready"`):
			up = l
		}
	}
	for _, w := range []string{"level=WARN", "org=acme", "provider=gpu-a", "class=health_check_failed", "upstream_status=503 ", "returned 503"} {
		if !strings.Contains(down, w) {
			t.Errorf("not-ready line %q lacks %q", down, w)
		}
	}
	for _, w := range []string{"level=INFO", "org=acme", "provider=gpu-a", "previous_class=health_check_failed", "upstream_status=200"} {
		if !strings.Contains(up, w) {
			t.Errorf("ready line %q lacks %q", up, w)
		}
	}
	if out := logs.String(); strings.Contains(out, "4242") || strings.Contains(out, secretKey.Reveal()) {
		t.Errorf("the log names the provider by number or holds its key:\n%s", out)
	}

	// Nothing listens: the upstream never answered, so its status is 0,
	// both for the cache's own probe and for a reading fed to it.
	for _, feed := range []bool{false, true} {
		dead := newEngine(t)
		dead.set("/health", 200, "")
		base := dead.url() + "/v1"
		c, logs := newTestCache(t, Config{FailAfter: 1})
		c.Sync([]Provider{{ID: 7, Kind: store.KindVLLM, BaseURL: base, Org: "acme", Slug: "gpu-b"}})
		dead.srv.Close()
		if feed {
			c.Feed(7, Reading{BaseURL: base, Health: refusedError(t)})
		} else {
			c.ProbeAll(context.Background())
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="metadata: provider not ready"`) {
				line = l
			}
		}
		for _, w := range []string{"provider=gpu-b", "class=health_check_failed", "upstream_status=0 "} {
			if !strings.Contains(line, w) {
				t.Errorf("fed %v: refused not-ready line %q lacks %q", feed, line, w)
			}
		}
	}
}
