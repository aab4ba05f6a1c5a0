package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// attempt sends the request to target i (tg) with one key, in the shape
// the target's pairing makes, and returns how it ended.
func (g *Gateway) attempt(w http.ResponseWriter, r *http.Request, x *exchange, i int, tg *targetRT, key *keyRT) outcome {
	// design 003: on an upstream-metadata provider the discovered id is
	// always the one sent (admit took targets naming another out).
	upstreamModel := x.plan.model(x) // a fallback route sends its own name
	if tg.provider.upstream || tg.id.model != "" {
		upstreamModel = sendModel(tg, g.status(tg.provider), upstreamModel)
	}
	if upstreamModel == "" { // the provider went not ready since admit
		return outcome{result: result{class: ClassConnect, err: errNotReady}}
	}
	pr := tg.provider.pairs[x.api]
	ctx, cancel := context.WithCancelCause(r.Context())
	cw := x.client
	// The attempt's cleanup runs here, or, for a stream past its first
	// event, when serve has relayed the rest (finishStream).
	end := attemptEnd{cw: cw, stopDrain: watchDrain(tg.provider, cancel), cancel: cancel}
	handedOff := false
	defer func() {
		if !handedOff {
			end.run()
		}
	}()
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
	if x.tr != nil {
		x.tr.inject(req.Header)
	}
	wd := newWatchdog(tg.provider.firstByteTimeout, tg.provider.idleTimeout, cancel)
	end.wd, cw.wd = wd, wd
	o := g.exchangeWith(ctx, call{x: x, w: cw, r: r, wd: wd, model: sent}, pr, tg, req)
	if o.tail != nil {
		handedOff = true
		o.tail.model, o.tail.end = upstreamModel, end
		return o
	}
	o.model = upstreamModel
	if cw.slow {
		// Whatever the attempt saw afterwards (a cancelled context, a
		// broken write), it ended because the client stopped reading.
		o.class = ClassClientSlow
	}
	return o
}

// attemptEnd is an attempt's cleanup: its watchdog, its drain watch and
// its context.
type attemptEnd struct {
	cw        *clientWriter
	wd        *watchdog // nil until the request is sent
	stopDrain func() bool
	cancel    context.CancelCauseFunc
}

func (e *attemptEnd) run() {
	if e.wd != nil {
		e.cw.wd = nil
		e.wd.stop()
	}
	e.stopDrain()
	e.cancel(nil)
}

// exchangeWith sends req and answers the client through pairing pr: a
// caller error is relayed unchanged, a retryable status fails the attempt,
// and a 2xx goes to pr's respond or relay.
func (g *Gateway) exchangeWith(ctx context.Context, c call, pr pairing, tg *targetRT, req *http.Request) (o outcome) {
	sent := time.Now()
	resp, err := g.transport.RoundTrip(req)
	if err != nil {
		cls := classifyErr(err, ctx, c.r.Context())
		return c.outcome(result{class: cls, refused: cls == ClassConnect && connRefused(err), err: fmt.Errorf("send: %w", attemptErr(err, ctx))})
	}
	c.x.upstreamTTFB = time.Since(sent)
	defer func() {
		if o.tail == nil { // a stream's tail closes the body when it ends
			_ = resp.Body.Close()
		}
	}()
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
		if overflowed(c.x, resp.StatusCode) {
			// A prompt too long for this pool, and the route has a
			// context fallback: not relayed, the request moves there
			// (fallback.go).
			if head == nil {
				head, _ = io.ReadAll(io.LimitReader(resp.Body, modelGoneSniff))
			}
			if contextExceeded(head) {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				return c.outcome(result{class: ClassCaller, status: resp.StatusCode, overflow: true})
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
