package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rolter/rolter/internal/balancer"
	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/store"
)

// result is how one attempt ended.
type result struct {
	class      Class
	status     int           // upstream status, when there was a response
	retryAfter time.Duration // from a 429
	committed  bool          // bytes reached the client: no more failover
	model      string        // the model id sent upstream (for a stale mark)
	// err is why the attempt failed, wrapping the transport or read error
	// when there was one; nil on success and for a relayed caller error.
	// It is logged, never sent to the client.
	err error
}

// forward runs attempts until one succeeds, the request is the caller's
// fault, the client leaves, or attempts and the retry deadline run out.
// Before the first byte reaches the client any retryable failure moves on
// to another target or key; after it, nothing is retried.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, x *exchange) {
	plan := x.plan
	n := len(plan.targets)
	cands := make([]balancer.Candidate, n)
	tried := make([]bool, n)
	triedKeys := map[int64]bool{}
	deadline := g.clock.Now().Add(g.cfg.RetryDeadline)
	var (
		last          outcome
		maxRetryAfter time.Duration
		busy          *providerRT // a provider at its max_concurrency, skipped
	)
	for x.attempts < g.cfg.MaxAttempts && (x.attempts == 0 || g.clock.Now().Before(deadline)) {
		i, tgProbe := g.pickTarget(plan, cands, tried, x.down)
		if i < 0 {
			break
		}
		tg := plan.targets[i]
		// The provider's max_concurrency counts attempts in flight on this
		// replica, whatever the address; a full provider is skipped like an
		// unavailable one.
		if !tg.provider.limiter.Acquire() {
			tried[i] = true
			busy = tg.provider
			if tgProbe {
				tg.breaker.Abandon()
			}
			continue
		}
		key, keyProbe, ok := g.pickKey(tg.provider, triedKeys)
		if !ok { // every key of this provider was tried: the target is spent
			tg.provider.limiter.Release()
			tried[i] = true
			if tgProbe {
				tg.breaker.Abandon()
			}
			continue
		}
		if x.attempts > 0 {
			g.metrics.failovers.WithLabelValues(x.key.Project.Org.Name, x.key.Project.Name, plan.route).Inc()
		}
		x.attempts++
		x.target = tg
		tg.stats.Begin()
		began := time.Now()
		o := g.attempt(w, r, x, i, tg, key)
		res := o.result
		tg.provider.limiter.Release()
		tg.stats.End(time.Since(began), res.class == ClassNone)
		last = o
		g.metrics.attempts.WithLabelValues(tg.provider.org, tg.provider.slug, attemptLabel(res.class)).Inc()
		g.judge(tg, key, tgProbe, keyProbe, res)
		g.logAttempt(x, tg, res)

		v := verdicts[res.class]
		if res.class == ClassNone || res.committed || !v.retry {
			x.record(o)
			x.status, x.class = res.status, res.class
			if v.status == 499 { // the client's doing: cancelled or too slow
				x.status = 499
			}
			return
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
		tried[i] = true
	}
	if x.attempts == 0 && busy != nil {
		e := newError(http.StatusTooManyRequests, "concurrency_limited",
			"provider "+quoteModel(busy.slug)+" is at its max_concurrency of "+strconv.Itoa(busy.policy.MaxConcurrency)+" requests in flight")
		e.retryAfter = 1
		x.status, x.class = e.status, ClassNone
		x.writeError(w, e)
		return
	}
	g.exhausted(w, x, last, maxRetryAfter)
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
	attrs := []slog.Attr{slog.String("request_id", x.requestID), slog.String("org", tg.provider.org),
		slog.String("provider", tg.provider.slug), slog.String("class", string(res.class)),
		slog.Int("attempt", x.attempts), slog.String("upstream_model", capModel(res.model))}
	if res.status != 0 {
		attrs = append(attrs, slog.Int("status", res.status))
	}
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

// pickTarget chooses an untried target: by the route's strategy among those
// not cooling, else (panic mode) the untried one whose cooldown ends first,
// so that a fully cooled pool still gets a chance instead of failing every
// request. probe reports that this request holds the target's half-open
// probe.
func (g *Gateway) pickTarget(plan *routePlan, cands []balancer.Candidate, tried, down []bool) (int, bool) {
	now := g.clock.Now()
	for i := range tried {
		tried[i] = tried[i] || down[i] // not routable: never a candidate, not even in panic mode
	}
	for {
		for i, tg := range plan.targets {
			cands[i] = balancer.Candidate{Weight: plan.weights[i], Stats: tg.stats,
				Skip: tried[i] || tg.breaker.Until().After(now)}
		}
		i := plan.selector.Pick(cands)
		if i < 0 {
			if plan.pinned {
				return -1, false
			}
			return g.panicTarget(plan, tried), false
		}
		ok, probe := plan.targets[i].breaker.Allow()
		if ok {
			return i, probe
		}
		// Another request holds the half-open probe: not ours to send.
		tried[i] = true
	}
}

func (g *Gateway) panicTarget(plan *routePlan, tried []bool) int {
	best := -1
	var bestUntil time.Time
	for i, tg := range plan.targets {
		if tried[i] || plan.weights[i] == 0 {
			continue
		}
		if u := tg.breaker.Until(); best < 0 || u.Before(bestUntil) {
			best, bestUntil = i, u
		}
	}
	return best
}

// pickKey chooses a pool key: random by weight among keys neither tried nor
// cooling, else the untried key whose cooldown ends first. A provider
// without keys sends no credential (ok, key nil). ok is false when every key
// was tried.
func (g *Gateway) pickKey(p *providerRT, tried map[int64]bool) (key *keyRT, probe, ok bool) {
	if len(p.keys) == 0 {
		return nil, false, true
	}
	now := g.clock.Now()
	for {
		total := 0
		for _, k := range p.keys {
			if !tried[k.id] && k.weight > 0 && !k.breaker.Until().After(now) {
				total += k.weight
			}
		}
		if total == 0 {
			break
		}
		n := rand.IntN(total)
		for _, k := range p.keys {
			if tried[k.id] || k.weight <= 0 || k.breaker.Until().After(now) {
				continue
			}
			if n -= k.weight; n < 0 {
				key = k
				break
			}
		}
		if ok, probe := key.breaker.Allow(); ok {
			return key, probe, true
		}
		tried[key.id] = true
	}
	// Panic mode for keys; a drained key (weight 0) stays out.
	for _, k := range p.keys {
		if tried[k.id] || k.weight <= 0 {
			continue
		}
		if key == nil || tried[key.id] || k.breaker.Until().Before(key.breaker.Until()) {
			key = k
		}
	}
	if key == nil || tried[key.id] {
		return nil, false, false
	}
	return key, false, true
}

// exhausted answers when no attempt succeeded, naming the class that ended
// it. Upstream 5xx bodies are never echoed.
func (g *Gateway) exhausted(w http.ResponseWriter, x *exchange, last outcome, maxRetryAfter time.Duration) {
	x.class = last.class
	if x.attempts == 0 {
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
		x.status = e.status
		x.writeError(w, e)
		return
	}
	x.record(last)
	v := verdicts[last.class]
	msg := "all upstream attempts failed (" + strconv.Itoa(x.attempts) + " tried); the last ended with " + string(last.class)
	if last.status != 0 {
		msg += " (upstream status " + strconv.Itoa(last.status) + ")"
	}
	e := newError(v.status, v.clientCode, msg)
	// The largest Retry-After any key or target asked for, whatever class
	// ended the request: the client should not come back sooner.
	e.retryAfter = int((maxRetryAfter + time.Second - 1) / time.Second)
	x.status = e.status
	x.writeError(w, e)
}

// forwardHeaders are the client headers an upstream sees; everything else
// stays at the gateway. An allowlist, because the operator's key pays: a
// client must not pick what it bills to (OpenAI-Organization,
// OpenAI-Project) nor send anything else the operator did not choose.
var forwardHeaders = map[string][]string{
	"":                  {"Accept", "Openai-Beta"},                         // OpenAI-compatible kinds (canonical keys)
	store.KindAnthropic: {"Accept", "Anthropic-Version", "Anthropic-Beta"}, // Messages API
}

// upstreamHeaders sets the headers of an upstream request: the allowlisted
// client headers for the target's kind, JSON as the content type whatever
// the client declared (curl's default form encoding would be refused), and
// the request id.
func upstreamHeaders(dst, src http.Header, p *providerRT, requestID string) {
	allow := forwardHeaders[""]
	if p.kind == store.KindAnthropic {
		allow = forwardHeaders[store.KindAnthropic]
	}
	for _, k := range allow {
		if vs := src[k]; len(vs) > 0 {
			dst[k] = vs
		}
	}
	// The operator's additions (settings.forward_headers, validated by the
	// admin API to exclude credentials and framing).
	for _, k := range p.forward {
		if vs := src[k]; len(vs) > 0 {
			dst[k] = vs
		}
	}
	if len(p.forwardPrefixes) > 0 {
		for k, vs := range src {
			for _, pre := range p.forwardPrefixes {
				if strings.HasPrefix(k, pre) {
					dst[k] = vs
				}
			}
		}
	}
	dst["Content-Type"] = jsonContentType
	dst["X-Request-Id"] = []string{requestID}
}

var jsonContentType = []string{"application/json"}

// responseHeaders are the upstream response headers a client sees: an
// allowlist, like the request side. The rest describe the operator's
// account or servers (OpenAI-Organization, OpenAI-Project,
// anthropic-organization-id, the upstream's own x-ratelimit-* quota, which
// would contradict the caller's limits at the gateway (limits.go), Server,
// Set-Cookie, its request id) and stay at the gateway.
var responseHeaders = []string{"Content-Type", "Content-Encoding", "Content-Language", "Cache-Control", "Retry-After"}

// copyResponseHeaders copies the allowlisted response headers.
func copyResponseHeaders(dst, src http.Header) {
	for _, k := range responseHeaders {
		if vs := src[k]; len(vs) > 0 {
			dst[k] = vs
		}
	}
}

// watchdog cancels an attempt that goes quiet: first with the first-byte
// timeout, then, once data flows, with the idle timeout between events.
type watchdog struct {
	t         *time.Timer
	started   atomic.Bool
	stopped   bool // by the request's goroutine: resume must not re-arm it
	firstByte time.Duration
	idle      time.Duration
}

func newWatchdog(firstByte, idle time.Duration, cancel context.CancelCauseFunc) *watchdog {
	wd := &watchdog{firstByte: firstByte, idle: idle}
	wd.t = time.AfterFunc(firstByte, func() {
		if wd.started.Load() {
			cancel(errIdleTimeout)
		} else {
			cancel(errFirstByteTimeout)
		}
	})
	return wd
}

// progress records data: the idle timeout restarts.
func (wd *watchdog) progress() {
	wd.started.Store(true)
	wd.t.Reset(wd.idle)
}

func (wd *watchdog) stop() {
	wd.stopped = true
	wd.t.Stop()
}

// pause and resume bracket a write to the client: waiting on the client is
// not upstream silence.
func (wd *watchdog) pause() { wd.t.Stop() }

func (wd *watchdog) resume() {
	if wd.stopped {
		return
	}
	if wd.started.Load() {
		wd.t.Reset(wd.idle)
	} else {
		wd.t.Reset(wd.firstByte)
	}
}

// attempt sends the request to target i (tg) with one key, in the shape
// the target's pairing makes, and returns how it ended.
func (g *Gateway) attempt(w http.ResponseWriter, r *http.Request, x *exchange, i int, tg *targetRT, key *keyRT) outcome {
	// design 003: on an upstream-metadata provider the discovered id is
	// always the one sent (admit took targets naming another out).
	upstreamModel := x.model
	if tg.provider.upstream || tg.id.model != "" {
		upstreamModel = sendModel(tg, g.status(tg.provider), x.model)
	}
	if upstreamModel == "" { // the provider went not ready since admit
		return outcome{result: result{class: ClassConnect, err: errNotReady}}
	}
	pr := tg.provider.pairs[x.api]
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	model := ""
	if upstreamModel != x.model {
		model = upstreamModel
	}
	sent := capModel(upstreamModel)
	body, err := pr.request(ctx, x, i, model)
	if err != nil {
		// Cannot happen: translate put the same request in this shape
		// under admit's policy. If it does, this target is skipped, as
		// before the pairings: another may serve, and no upstream saw it.
		return outcome{result: result{class: ClassSkipped, model: upstreamModel, err: fmt.Errorf("shape the request: %w", err)},
			upstreamModel: sent}
	}
	req, err := http.NewRequestWithContext(body.ctx, http.MethodPost, tg.provider.base+pr.path(x.endpoint), body.send)
	if err != nil {
		return outcome{result: result{class: ClassConnect, err: fmt.Errorf("build the request: %w", err)}, upstreamModel: sent}
	}
	req.ContentLength, req.GetBody = int64(len(body.b)), body.getBody
	if len(body.b) == 0 {
		req.Body, req.GetBody = http.NoBody, nil
	}
	upstreamHeaders(req.Header, r.Header, tg.provider, x.requestID)
	setCredential(req.Header, tg, key)
	wd := newWatchdog(tg.provider.firstByteTimeout, tg.provider.idleTimeout, cancel)
	defer wd.stop()
	cw := x.client
	cw.wd = wd
	defer func() { cw.wd = nil }()
	o := g.exchangeWith(ctx, call{x: x, w: cw, r: r, wd: wd, model: sent}, pr, tg, req)
	o.model = upstreamModel
	if cw.slow {
		// Whatever the attempt saw afterwards (a cancelled context, a
		// broken write), it ended because the client stopped reading.
		o.class = ClassClientSlow
	}
	return o
}

// exchangeWith sends req and answers the client through pairing pr: a
// caller error is relayed unchanged, a retryable status fails the attempt,
// and a 2xx goes to pr's respond or relay.
func (g *Gateway) exchangeWith(ctx context.Context, c call, pr pairing, tg *targetRT, req *http.Request) outcome {
	resp, err := g.transport.RoundTrip(req)
	if err != nil {
		return c.outcome(result{class: classifyErr(err, ctx, c.r.Context()), err: fmt.Errorf("send: %w", attemptErr(err, ctx))})
	}
	defer resp.Body.Close()
	switch cls := classifyStatus(resp.StatusCode); cls {
	case ClassNone:
	case ClassCaller:
		var head []byte
		if tg.configured && modelGoneStatus(resp.StatusCode) {
			// A configured model the upstream says it does not serve is a
			// stale configuration, not the caller's fault: fail over, and
			// never relay the upstream's answer (it names its model id).
			head, _ = io.ReadAll(io.LimitReader(resp.Body, modelGoneSniff))
			if modelGone(resp.StatusCode, head, c.model) {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				return c.outcome(result{class: ClassModelGone, status: resp.StatusCode, err: errModelGone})
			}
		}
		// The caller's fault: relay unchanged, no retry.
		w := c.w
		copyResponseHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(head)
		_, _ = io.Copy(w, resp.Body)
		return c.outcome(result{class: ClassCaller, status: resp.StatusCode, committed: true})
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection reusable
		return c.outcome(result{class: cls, status: resp.StatusCode, retryAfter: retryAfter(resp.Header, g.clock.Now()), err: statusErr(resp.StatusCode)})
	}
	c.resp = resp
	if isEventStream(resp.Header) {
		return pr.relay(ctx, c)
	}
	return g.respond(ctx, c, pr)
}

func isEventStream(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
}

// progressReader reports every successful read to the watchdog.
type progressReader struct {
	r  io.Reader
	wd *watchdog
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.wd.progress()
	}
	return n, err
}

// respond reads a non-streamed answer whole (bounded) and scans it once,
// then pr answers the client from it.
func (g *Gateway) respond(ctx context.Context, c call, pr pairing) outcome {
	resp := c.resp
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength <= g.cfg.MaxResponse {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(progressReader{resp.Body, c.wd}, g.cfg.MaxResponse+1))
	body := buf.Bytes()
	if err != nil {
		return c.outcome(result{class: classifyErr(err, ctx, c.r.Context()), err: fmt.Errorf("read the response: %w", attemptErr(err, ctx))})
	}
	if int64(len(body)) > g.cfg.MaxResponse {
		return c.outcome(result{class: ClassServer, status: resp.StatusCode, err: errTooLarge})
	}
	c.wd.stop()
	rs, err := scanResponse(body)
	if m, ok := rs.model(body); ok && m != "" {
		c.model = capModel(m)
	}
	return pr.respond(c, body, rs, err)
}

// usageIn decodes a "usage" value.
func usageIn(v []byte) (prompt, completion int) {
	if len(v) == 0 || v[0] != '{' {
		return 0, 0
	}
	var u struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
	}
	if json.Unmarshal(v, &u) != nil {
		return 0, 0
	}
	return u.PromptTokens + u.InputTokens, u.CompletionTokens + u.OutputTokens
}

// responseSpans is what one scan of a response body finds: the first
// top-level "model" and "usage" members.
type responseSpans struct {
	modelStart, modelEnd int
	usageStart, usageEnd int
	hasModel, hasUsage   bool
}

var responseKeys = []string{"model", "usage"}

// scanResponse scans a response body once (jsonscan.LocateAll). err is
// non-nil when the body is not a JSON object as far as the model: a fault
// after a well-formed model member does not stop its rewrite.
func scanResponse(doc []byte) (responseSpans, error) {
	var sp [2][2]int
	err := jsonscan.LocateAll(doc, responseKeys, sp[:])
	rs := responseSpans{modelStart: sp[0][0], modelEnd: sp[0][1], hasModel: sp[0][0] >= 0,
		usageStart: sp[1][0], usageEnd: sp[1][1], hasUsage: sp[1][0] >= 0}
	if rs.hasModel {
		err = nil
	}
	return rs, err
}

// model is the response's model string; ok is false when absent or not a
// string.
func (rs *responseSpans) model(doc []byte) (string, bool) {
	if !rs.hasModel || doc[rs.modelStart] != '"' {
		return "", false
	}
	var buf [64]byte
	return string(jsonscan.Unquoted(doc, rs.modelStart, rs.modelEnd, buf[:0])), true
}

func (rs *responseSpans) usage(doc []byte) (prompt, completion int) {
	if !rs.hasUsage {
		return 0, 0
	}
	return usageIn(doc[rs.usageStart:rs.usageEnd])
}
