package readiness

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// Fed readings.
//
// A fleet host is probed by the fleet controller, which reads its /health
// and /v1/models every sweep to decide its registration. Probing it here
// too would double the requests and the connections, so the controller
// hands each reading of a registered host to Feed, and the cache records
// it as its own probe. While readings keep coming (within FeedGrace of the
// last), Run does not probe the provider; when they stop (the controller's
// replica lost its lease, its sweeps fail, the host's base URL changed) it
// probes the provider again on its own schedule. A replica without the
// lease therefore probes the fleet hosts itself: one prober per host and
// replica.

// Reading is one probe of a vLLM or SGLang server made by another prober:
// GET {root}/health, then GET {base}/models.
type Reading struct {
	// BaseURL is the base URL probed (…/v1). A reading of another URL
	// than the provider's is not recorded.
	BaseURL string
	// Health is nil when GET {root}/health answered 2xx, else why not.
	Health error
	// Models is the body of a 2xx GET {base}/models; nil when not read.
	Models []byte
	// ModelsErr is why GET {base}/models failed; nil when it was read or
	// not tried.
	ModelsErr error
	// RefusalConfirmed: Health is a refused connection (Refused) and the
	// prober dialled again at once and was refused again. Such a reading
	// takes a ready provider out at once; any other failure counts toward
	// FailAfter.
	RefusalConfirmed bool
	// Status is the HTTP status of the last answer the prober read: of
	// /health when Health failed, else of /models when it was asked; 0
	// when that request got no answer (refused, timed out).
	Status int
}

// FeedGrace is how long after a fed reading Run leaves the provider to
// the feeder: two intervals, so a sweep that runs late is not raced.
func (c *Cache) FeedGrace() time.Duration { return 2 * c.cfg.Interval }

// fedUntil is when, by the cache's clock, the provider's last fed reading
// stops standing in for a probe; zero when it was never fed.
func (c *Cache) fedUntil(e *entry) time.Time {
	n := e.fed.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).Add(c.FeedGrace())
}

// Feed records r as a probe of provider id and reports whether it did: it
// does for a vllm or sglang provider whose base URL r names, when r says
// what this cache would have asked (an upstream-metadata provider needs
// the model list unless health failed). The reading counts like a probe
// of Run's: FailAfter, RecoverAfter, stale marks (cleared by a listed
// model; a reading without the list keeps them), OnChange.
func (c *Cache) Feed(id int64, r Reading) bool {
	e, ok := (*c.entries.Load())[id]
	if !ok {
		return false
	}
	if p := e.provider.Load(); r.BaseURL != p.BaseURL || (p.Kind != store.KindVLLM && p.Kind != store.KindSGLang) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := *e.provider.Load()
	redact := func(s string) string { return redactSecret(s, p.Credential) }
	var o observation
	switch {
	case r.Health != nil:
		o = healthFailed(redact("health probe failed: GET /health: " + plainError(r.Health)))
		o.refused = Refused(r.Health)
		o.decisive = o.refused && r.RefusalConfirmed
	case !p.Upstream:
	case r.ModelsErr != nil:
		o = metadataError("GET /models", errors.New(plainError(r.ModelsErr)), redact)
	case r.Models == nil:
		return false
	default:
		o = fromModels(r.Models, redact)
	}
	o.status = r.Status
	models := r.Models
	if models == nil {
		models = []byte{} // no list read: the stale marks stay, and no request is sent for them
	}
	c.record(context.Background(), e, p, o, models, c.clock.Now())
	e.fed.Store(c.clock.Now().UnixNano())
	return true
}

// plainError is err's text without a *url.Error's "Get \"http://…\":"
// prefix, as the cache's own probes report it.
func plainError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
