package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/policy"
)

// result is how one attempt ended.
type result struct {
	class      Class
	status     int           // upstream status, when there was a response
	retryAfter time.Duration // from a 429
	committed  bool          // bytes reached the client: no more failover
	refused    bool          // the connection was refused: nothing reached the upstream (routable.go)
	overflow   bool          // a 400 saying the prompt exceeds the context, not relayed (fallback.go)
	model      string        // the model id sent upstream (for a stale mark)
	// err is why the attempt failed, wrapping the transport or read error
	// when there was one; nil on success and for a relayed caller error.
	// It is logged, never sent to the client.
	err error
}

// forward runs the attempts of the request's route, then, when every one
// failed before the first byte, of its fallback routes (fallback.go), and
// answers with the last failure when none served.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, x *exchange) {
	deadline := g.clock.Now().Add(g.cfg.RetryDeadline)
	e := g.forwardPlan(w, r, x, deadline)
	if e != nil && e.Code == policy.CodeContextLengthExceeded {
		e = g.overflowed(w, r, x, e, deadline)
	}
	if e != nil {
		e = g.fallBack(w, r, x, e, deadline)
	}
	if e != nil {
		x.status = e.status
		x.writeError(w, e)
	}
}

// forwardPlan runs attempts on x.plan until one succeeds, the request is
// the caller's fault, the client leaves, or attempts and the retry
// deadline run out; it returns the error to answer with, nil when the
// request was answered. Before the first byte reaches the client any
// retryable failure moves on to another target or key; after it, nothing
// is retried. Attempts are counted per priority tier: a tier whose
// attempts are spent passes the request to the next (pickTarget). Up to
// MaxRefusals refused connections do not count as attempts: each moves on
// to another distinct target.
func (g *Gateway) forwardPlan(w http.ResponseWriter, r *http.Request, x *exchange, deadline time.Time) *apiError {
	plan := x.plan
	ex := newExclusions(x)
	triedKeys := map[int64]bool{}
	refusals := 0 // refused attempts not counted against MaxAttempts
	x.tier, x.tierSpent = 0, 0
	tried := 0 // attempts on this plan
	var (
		last          outcome
		maxRetryAfter time.Duration
		busy          *providerRT // a provider at its max_concurrency, skipped
	)
	for tried == 0 || g.clock.Now().Before(deadline) {
		if x.tierSpent >= g.cfg.MaxAttempts {
			if x.tier+1 >= len(x.facts.tiers) {
				break
			}
			x.tier, x.tierSpent = x.tier+1, 0 // this tier's attempts are spent: the next one's turn
		}
		i, tgProbe := g.pickTarget(x, ex)
		if i < 0 {
			break
		}
		tg := plan.targets[i]
		// The provider's max_concurrency counts attempts in flight on this
		// replica, whatever the address; a full provider is skipped like an
		// unavailable one.
		if !tg.provider.limiter.Acquire() {
			ex.tried.add(i)
			busy = tg.provider
			if tgProbe {
				tg.breaker.Abandon()
			}
			continue
		}
		key, keyProbe, ok := g.pickKey(tg.provider, triedKeys)
		if !ok { // every key of this provider was tried: the target is spent
			tg.provider.limiter.Release()
			ex.tried.add(i)
			if tgProbe {
				tg.breaker.Abandon()
			}
			continue
		}
		if x.attempts > 0 {
			g.observeFailover(x, tg, last)
		}
		x.attempts++
		tried++
		x.tierSpent++
		x.target = tg
		tg.stats.Begin()
		began := time.Now()
		if x.tr != nil {
			x.tr.startAttempt(x, tg)
		}
		o := g.attempt(w, r, x, i, tg, key)
		rec := attemptRec{tg: tg, key: key, tgProbe: tgProbe, keyProbe: keyProbe, began: began}
		if o.tail != nil {
			// A stream past its first event: answered. serve relays the
			// rest and ends the attempt (finishStream).
			o.tail.att = rec
			x.tail = o.tail
			return nil
		}
		g.endAttempt(x, rec, o)
		res := o.result
		last = o
		if res.refused && refusals < MaxRefusals {
			refusals++
			x.tierSpent-- // a refusal is free, up to MaxRefusals
		}

		v := verdicts[res.class]
		if res.overflow {
			x.record(o)
			x.status, x.class = res.status, res.class
			return errOverflow()
		}
		if res.class == ClassNone || res.committed || !v.retry {
			x.record(o)
			x.status, x.class = res.status, res.class
			if v.status == 499 { // the client's doing: cancelled or too slow
				x.status = 499
			}
			return nil
		}
		if res.class == ClassRateLimited {
			maxRetryAfter = max(maxRetryAfter, res.retryAfter)
		}
		if (res.class == ClassRateLimited || res.class == ClassCredential || res.class == ClassForbidden) && key != nil {
			triedKeys[key.id] = true // another key of the same target may still serve
			continue
		}
		if v.stale {
			g.markStale(tg, res.model)
		}
		ex.tried.add(i)
	}
	if tried == 0 && busy != nil {
		e := newError(http.StatusTooManyRequests, "concurrency_limited",
			"provider "+quoteModel(busy.slug)+" is at its max_concurrency of "+strconv.Itoa(busy.policy.MaxConcurrency)+" requests in flight")
		e.retryAfter = 1
		x.class = ClassNone
		return e
	}
	return g.exhausted(x, tried, last, maxRetryAfter)
}

// attemptRec is what ending an attempt needs besides its outcome.
type attemptRec struct {
	tg                *targetRT
	key               *keyRT
	tgProbe, keyProbe bool // the attempt holds the breakers' half-open probes
	began             time.Time
}

// endAttempt accounts for an attempt that ended with o: its trace span,
// the provider's concurrency slot, the deployment's load, metrics, the
// breakers, and a log line when it failed.
func (g *Gateway) endAttempt(x *exchange, a attemptRec, o outcome) {
	tg, key, res := a.tg, a.key, o.result
	if x.tr != nil {
		x.tr.endAttempt(x, o)
	}
	tg.provider.limiter.Release()
	tg.stats.End(time.Since(a.began), res.class == ClassNone)
	g.observeAttempt(x, tg, res, a.began)
	was, wasKey := tg.breaker.Until(), keyUntil(key)
	g.judge(tg, key, a.tgProbe, a.keyProbe, res)
	if now := g.clock.Now(); cooling(was, now) != cooling(tg.breaker.Until(), now) {
		g.healthGen.Add(1) // it began cooling: routable sets follow
	}
	g.observeCooldowns(x, tg, key, was, wasKey, res)
	if res.refused {
		g.refused(tg)
	}
	g.logAttempt(x, tg, res)
}

// finishStream ends the attempt of a stream relayed to its end (x.tail,
// after its run) and records it as the request's last, as forwardPlan
// does for an attempt that committed.
func (g *Gateway) finishStream(x *exchange) {
	t := x.tail
	o := t.o
	t.close()
	x.tail = nil
	o.tail, o.model = nil, t.model
	if x.client.slow {
		o.class = ClassClientSlow // as in attempt
	}
	g.endAttempt(x, t.att, o)
	x.record(o)
	x.status, x.class = o.status, o.class
	if verdicts[o.class].status == 499 {
		x.status = 499
	}
}

// releaseAfter runs release (a route's admission) now, or, when the
// request's stream is still to be relayed, when the request ends.
func (x *exchange) releaseAfter(release func()) {
	switch {
	case release == nil:
	case x.tail != nil:
		x.releases = append(x.releases, release)
	default:
		release()
	}
}

// record copies what the request's final attempt learned into the
// exchange, for account: the one place an attempt's outcome reaches it.
func (x *exchange) record(o outcome) {
	x.upstreamModel, x.ttft, x.promptTokens, x.outputTokens = o.upstreamModel, o.ttft, o.promptTokens, o.outputTokens
}

// markStale takes a deployment whose upstream said it does not serve the
// model out of routing until a probe lists it again (package readiness);
// without a readiness cache the request still fails over.
func (g *Gateway) markStale(tg *targetRT, model string) {
	if m, ok := g.ready.(interface {
		MarkStale(providerID int64, model, reason string) bool
	}); ok && model != "" {
		m.MarkStale(tg.provider.id, model, "the upstream answered that it does not serve this model (404 model_not_found); "+
			"the configuration is stale: check the provider's models and the targets naming it")
	}
}

// judge feeds an attempt's outcome to the target's and key's breakers.
func (g *Gateway) judge(tg *targetRT, key *keyRT, tgProbe, keyProbe bool, res result) {
	v := verdicts[res.class]
	switch {
	case res.class == ClassNone || res.class == ClassCaller:
		tg.breaker.Success()
		if key != nil {
			key.breaker.Success()
		}
		return
	case v.rateLimit:
		if key != nil {
			key.breaker.RateLimited(res.retryAfter)
		} else {
			tg.breaker.RateLimited(res.retryAfter)
			return
		}
	case v.credential:
		g.metrics.credentialFailures.WithLabelValues(tg.provider.org, tg.provider.slug).Inc()
		if key == nil {
			tg.breaker.Refused(g.cfg.CredentialCooldown)
			return
		}
		key.breaker.Refused(g.cfg.CredentialCooldown)
		if tgProbe {
			tg.breaker.Abandon()
		}
		return
	case v.penalise && res.refused:
		tg.breaker.Trip() // certain: out at once, not after Threshold failures
		if keyProbe {
			key.breaker.Abandon()
		}
		return
	case v.penalise:
		tg.breaker.Failure()
		if keyProbe {
			key.breaker.Abandon()
		}
		return
	}
	// Neither verdict touched these probes (client cancel, or the target of
	// a rate-limited key): release them for the next caller.
	if tgProbe {
		tg.breaker.Abandon()
	}
	if keyProbe && !v.rateLimit {
		key.breaker.Abandon()
	}
}

// logAttempt logs a failed attempt, as httputil.ReverseProxy logs every
// transport error: at warn for the upstream's failures, at info for the
// client's doing (it left, or stopped reading). A caller error is the
// upstream's answer relayed to the caller, not a failure: it is not logged.
// Every attribute is bounded and free of secrets: the request id (at most
// 128 visible bytes), org and provider from configuration, class and
// status from fixed sets, the model sent (capped), and the cause, which
// never holds an upstream body nor a credential.
func (g *Gateway) logAttempt(x *exchange, tg *targetRT, res result) {
	if res.class == ClassNone || res.class == ClassCaller {
		return
	}
	level := slog.LevelWarn
	if verdicts[res.class].status == 499 {
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !g.log.Enabled(ctx, level) {
		return
	}
	attrs := append(requestAttrs(x, tg.provider, res.class, res.status, 4),
		slog.Int("attempt", x.attempts), slog.String("upstream_model", capModel(res.model)))
	if res.committed {
		attrs = append(attrs, slog.Bool("committed", true))
	}
	if res.err != nil {
		attrs = append(attrs, slog.String("err", res.err.Error()))
	}
	g.log.LogAttrs(ctx, level, "upstream attempt failed", attrs...)
}

func attemptLabel(c Class) string {
	if c == ClassNone {
		return "ok"
	}
	return string(c)
}

// exhausted is the answer when no attempt on x.plan succeeded (tried of
// them), naming the class that ended it. Upstream 5xx bodies are never
// echoed.
func (g *Gateway) exhausted(x *exchange, tried int, last outcome, maxRetryAfter time.Duration) *apiError {
	x.class = last.class
	if tried == 0 {
		x.class = ClassConnect
		msg := "no target of " + quoteModel(x.model) + " is available"
		var wait time.Duration
		if x.plan.pinned {
			// A pinned request is never sent elsewhere, nor forced onto a
			// cooling provider: say when it may be tried again.
			for _, tg := range x.plan.targets {
				if d := tg.breaker.Until().Sub(g.clock.Now()); d > 0 && (wait == 0 || d < wait) {
					wait = d
				}
			}
			msg = "the pinned provider " + quoteModel(x.plan.targets[0].provider.slug) + " is cooling down after upstream failures; it is not replaced by another provider"
		}
		e := newError(http.StatusServiceUnavailable, "upstream_unavailable", msg)
		e.retryAfter = int((wait + time.Second - 1) / time.Second)
		return e
	}
	x.record(last)
	v := verdicts[last.class]
	msg := "all upstream attempts failed (" + strconv.Itoa(tried) + " tried); the last ended with " + string(last.class)
	if x.target != nil {
		// The provider's slug, never its URL: the URL is in the log line
		// and the admin view, not for a key holder.
		msg += " at provider " + quoteModel(x.target.provider.slug)
	}
	if last.status != 0 {
		msg += " (upstream status " + strconv.Itoa(last.status) + ")"
	}
	e := newError(v.status, v.clientCode, msg)
	// The largest Retry-After any key or target asked for, whatever class
	// ended the request: the client should not come back sooner.
	e.retryAfter = int((maxRetryAfter + time.Second - 1) / time.Second)
	return e
}
