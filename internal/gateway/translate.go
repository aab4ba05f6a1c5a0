package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/anthropic"
)

// countTokens is Anthropic's token-counting endpoint, passed through to
// Anthropic upstreams.
const countTokens = "/messages/count_tokens"

// anthropicVersion is sent to Anthropic upstreams when the client did not
// send its own anthropic-version (an OpenAI-shaped client never does).
const anthropicVersion = "2023-06-01"

// crossKind reports whether target tg speaks the other API than the client:
// a Messages client and an OpenAI-compatible upstream, or a chat client and
// an Anthropic upstream. Same-format pairs pass through.
func (x *exchange) crossKind(tg *targetRT) bool {
	if x.anthropic {
		return tg.provider.kind != "anthropic"
	}
	return x.endpoint == "/chat/completions" && tg.provider.kind == "anthropic"
}

// translate prepares the request in the other API's shape when a routable
// target needs it. A feature the other side cannot represent is a 400 that
// names the field; it is never dropped.
func (x *exchange) translate(body []byte) *apiError {
	need := false
	for i, tg := range x.plan.targets {
		need = need || (!x.down[i] && x.crossKind(tg))
	}
	if !need {
		return nil
	}
	if x.endpoint == countTokens {
		return newError(http.StatusBadRequest, "unsupported_feature",
			"count_tokens is answered by Anthropic upstreams only; "+quoteModel(x.model)+" has a target of another kind")
	}
	var err error
	if x.anthropic {
		x.translated, err = anthropic.ToOpenAI(body)
	} else {
		x.translated, err = anthropic.ToAnthropic(body)
		x.clientUsage = bytes.Contains(body, []byte(`"include_usage":true`))
	}
	var te *anthropic.Error
	switch {
	case errors.As(err, &te) && te.Code == anthropic.CodeTooManyBlocks:
		return newError(http.StatusBadRequest, te.Code, te.Message+"; "+te.Field+" is over the limit")
	case errors.As(err, &te):
		return newError(http.StatusBadRequest, "unsupported_feature",
			"the upstream's API cannot represent "+te.Field+": "+te.Message)
	case err != nil:
		return newError(http.StatusBadRequest, "invalid_request", "the request could not be translated: "+err.Error())
	}
	return nil
}

// translateBody is body in the other API's shape, for an attempt whose
// target admitted another body than the one translate prepared; ok is
// false when it cannot be translated.
func (x *exchange) translateBody(body []byte) ([]byte, bool) {
	var (
		out []byte
		err error
	)
	if x.anthropic {
		out, err = anthropic.ToOpenAI(body)
	} else {
		out, err = anthropic.ToAnthropic(body)
	}
	return out, err == nil
}

// upstreamPath is where a request for tg goes under its base_url.
func (x *exchange) upstreamPath(tg *targetRT) string {
	switch {
	case !x.crossKind(tg):
		return x.endpoint
	case x.anthropic:
		return "/chat/completions"
	}
	return "/messages"
}

// setCredential puts the pool key where the upstream's API expects it.
func setCredential(h http.Header, tg *targetRT, key *keyRT) {
	if tg.provider.kind == "anthropic" {
		if key != nil {
			h.Set("X-Api-Key", key.secret)
		}
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", anthropicVersion)
		}
		return
	}
	if key != nil {
		h.Set("Authorization", key.auth)
	}
}

// respondTranslated answers a non-streamed cross-kind request.
func (x *exchange) respondTranslated(w http.ResponseWriter, body []byte, status int) result {
	var (
		out []byte
		err error
	)
	if x.anthropic {
		out, err = anthropic.FromOpenAIResponse(body, x.model)
	} else {
		out, err = anthropic.FromAnthropicResponse(body, x.model)
	}
	if err != nil {
		return result{class: ClassServer, status: status}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Rolter-Upstream-Model", x.upstreamModel)
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return result{status: status, committed: true}
}

// relayTranslated streams a cross-kind response, translating event by
// event. As in relay, nothing reaches the client before the first
// translated event, which the upstream's first event produces: an upstream
// that fails before it (a reset, the first-byte timeout, an empty stream,
// an error event, data that cannot be translated) fails over like a
// same-API one. After it, a failure ends the stream through endStream, the
// same contract as relay's.
func (g *Gateway) relayTranslated(w http.ResponseWriter, r *http.Request, x *exchange, ctx context.Context, resp *http.Response, wd *watchdog) result {
	rc := http.NewResponseController(w)
	out := &commitWriter{w: w, commit: func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Rolter-Upstream-Model", x.upstreamModel)
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(resp.StatusCode)
	}}
	first := true
	flush := func() {
		if first {
			x.ttft, first = time.Since(x.start), false
		}
		_ = rc.Flush()
	}
	in := &readRecorder{r: progressReader{resp.Body, wd}}
	var (
		u   anthropic.Usage
		err error
	)
	if x.anthropic {
		u, err = anthropic.StreamToAnthropic(out, flush, in, x.model)
	} else {
		u, err = anthropic.StreamToOpenAI(out, flush, in, x.model, x.clientUsage)
	}
	x.promptTokens, x.outputTokens = u.InputTokens, u.OutputTokens
	if err == nil {
		return result{status: resp.StatusCode, committed: true}
	}
	// The class: the client's leaving, else how reading the upstream
	// failed, else the upstream's data (an error event, an early end,
	// something untranslatable) is at fault.
	cls, cause := ClassServer, err
	switch {
	case out.err != nil || r.Context().Err() != nil:
		cls = ClassClientCancelled
	case in.err != nil:
		cls, cause = classifyErr(in.err, ctx, r.Context()), attemptErr(in.err, ctx)
	}
	res := result{class: cls, status: resp.StatusCode, err: fmt.Errorf("translate the stream: %w", cause)}
	if !out.committed {
		if cls == ClassIdleTimeout {
			// Bytes came (comments, pings) but no event: nothing was sent,
			// so it is the first-byte timeout's case, and retried.
			res.class = ClassTimeout
		}
		return res
	}
	res.committed = true
	res.class = midStream(cls)
	x.endStream(w, rc, res.class)
	return res
}

// commitWriter sends the response's headers with its first write, so that
// an attempt that fails before writing anything can still fail over. It
// remembers a failed write: the client went away or stopped reading.
type commitWriter struct {
	w         io.Writer
	commit    func()
	committed bool
	err       error
}

func (c *commitWriter) Write(b []byte) (int, error) {
	if !c.committed {
		c.committed = true
		c.commit()
	}
	n, err := c.w.Write(b)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// readRecorder remembers the first read error other than io.EOF: a failed
// read of the upstream, as opposed to data the translation refused.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(b []byte) (int, error) {
	n, err := rr.r.Read(b)
	if err != nil && err != io.EOF && rr.err == nil {
		rr.err = err
	}
	return n, err
}
