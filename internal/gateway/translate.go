package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/anthropic"
	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/store"
)

// countTokens is Anthropic's token-counting endpoint, passed through to
// Anthropic upstreams.
const countTokens = "/messages/count_tokens"

// anthropicVersion is sent to Anthropic upstreams when the client did not
// send its own anthropic-version (an OpenAI-shaped client never does).
const anthropicVersion = "2023-06-01"

// translating is a pairing whose upstream speaks the other API than the
// client: OpenAI→Anthropic (a chat client, an Anthropic upstream) or
// Anthropic→OpenAI (a Messages client, an OpenAI-compatible upstream). It
// wraps package anthropic's translators, one per direction and shape.
type translating struct {
	upstreamPath string
	// toUpstream is the request in the upstream's shape.
	toUpstream func(body []byte) ([]byte, error)
	// fromResponse is a non-streamed answer in the client's shape, naming
	// model.
	fromResponse func(body []byte, model string) ([]byte, error)
	// stream translates an event stream event by event, calling flush
	// after each translated event.
	stream func(w io.Writer, flush func(), r io.Reader, x *exchange) (anthropic.Usage, error)
}

var (
	openAIToAnthropic pairing = &translating{upstreamPath: "/messages",
		toUpstream: anthropic.ToAnthropic, fromResponse: anthropic.FromAnthropicResponse,
		stream: func(w io.Writer, flush func(), r io.Reader, x *exchange) (anthropic.Usage, error) {
			return anthropic.StreamToOpenAI(w, flush, r, x.model, x.clientUsage)
		}}
	anthropicToOpenAI pairing = &translating{upstreamPath: "/chat/completions",
		toUpstream: anthropic.ToOpenAI, fromResponse: anthropic.FromOpenAIResponse,
		stream: func(w io.Writer, flush func(), r io.Reader, x *exchange) (anthropic.Usage, error) {
			return anthropic.StreamToAnthropic(w, flush, r, x.model)
		}}
)

func (*translating) translates() bool { return true }

func (t *translating) path(string) string { return t.upstreamPath }

// request is the translated body: the one translate made (for the policy
// admit's body was admitted under), unless target i's combined policy
// admitted the request differently (another output ceiling), when that
// target's own admitted body is translated; with model set when the
// upstream is sent another model than the client named.
func (t *translating) request(ctx context.Context, x *exchange, i int, model string) (upstreamBody, error) {
	b := x.translated
	if a := x.adm; a != nil && a.of(i) >= 0 && a.of(i) != a.base {
		var err error
		if b, err = t.toUpstream(x.admittedBody(a.of(i))); err != nil {
			return upstreamBody{}, fmt.Errorf("translate the body admitted for the target: %w", err)
		}
	}
	if model != "" {
		var err error
		if b, _, err = jsonscan.Set(nil, b, model); err != nil {
			return upstreamBody{}, fmt.Errorf("set the upstream model: %w", err)
		}
	}
	return upstreamBody{ctx: ctx, b: b, send: io.NopCloser(bytes.NewReader(b)),
		getBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}, nil
}

// translator is the translating pairing of the first routable target
// (under a policy that admits the request) that needs one; nil when no
// such target does. It looks at the plan's distinct policies, not its
// targets.
func (x *exchange) translator() *translating {
	for j, t := range x.facts.translator[x.api] {
		if t != nil && (x.adm == nil || x.adm.results[j].refusal == nil) {
			return t
		}
	}
	return nil
}

// translate prepares the request in the other API's shape when a routable
// target needs it. A feature the other side cannot represent is a 400 that
// names the field; it is never dropped.
func (x *exchange) translate(body []byte) *apiError {
	t := x.translator()
	if t == nil {
		return nil
	}
	if x.endpoint == countTokens {
		return newError(http.StatusBadRequest, "unsupported_feature",
			"count_tokens is answered by Anthropic upstreams only; "+quoteModel(x.model)+" has a target of another kind")
	}
	var err error
	x.translated, err = t.toUpstream(body)
	if x.api == apiChat {
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

// setCredential puts the pool key where the upstream's API expects it.
func setCredential(h http.Header, tg *targetRT, key *keyRT) {
	if tg.provider.kind == store.KindAnthropic {
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

// respond answers a non-streamed request in the client's shape.
func (t *translating) respond(c call, body []byte, rs responseSpans, _ error) outcome {
	status := c.resp.StatusCode
	if !json.Valid(body) {
		return c.outcome(result{class: ClassServer, status: status, err: errNotJSON})
	}
	o := c.outcome(result{status: status, committed: true})
	o.promptTokens, o.outputTokens = rs.usage(body)
	out, err := t.fromResponse(body, c.x.model)
	if err != nil {
		return o.with(result{class: ClassServer, status: status})
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Rolter-Upstream-Model", o.upstreamModel)
	h.Set("Content-Length", strconv.Itoa(len(out)))
	c.w.WriteHeader(status)
	_, _ = c.w.Write(out)
	return o
}

// relay streams the answer, translating event by event. As in the
// pass-through relay, nothing reaches the client before the first
// translated event, which the upstream's first event produces: an upstream
// that fails before it (a reset, the first-byte timeout, an empty stream,
// an error event, data that cannot be translated) fails over like a
// same-API one. After it, a failure ends the stream through endStream, the
// same contract as the pass-through relay's.
func (t *translating) relay(ctx context.Context, c call) outcome {
	w, resp, x := c.w, c.resp, c.x
	rc := http.NewResponseController(w)
	out := &commitWriter{w: w, commit: func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Rolter-Upstream-Model", c.model)
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(resp.StatusCode)
	}}
	var ttft time.Duration // set by the first flush
	flush := func() {
		if ttft == 0 {
			ttft = time.Since(x.start)
		}
		_ = rc.Flush()
	}
	in := &readRecorder{r: progressReader{resp.Body, c.wd}}
	u, err := t.stream(out, flush, in, x)
	o := c.outcome(result{})
	o.ttft, o.promptTokens, o.outputTokens = ttft, u.InputTokens, u.OutputTokens
	if err == nil {
		return o.with(result{status: resp.StatusCode, committed: true})
	}
	// The class: the client's leaving, else how reading the upstream
	// failed, else the upstream's data (an error event, an early end,
	// something untranslatable) is at fault.
	cls, cause := ClassServer, err
	switch {
	case out.err != nil || c.r.Context().Err() != nil:
		cls = ClassClientCancelled
	case in.err != nil:
		cls, cause = classifyErr(in.err, ctx, c.r.Context()), attemptErr(in.err, ctx)
	}
	res := result{class: cls, status: resp.StatusCode, err: fmt.Errorf("translate the stream: %w", cause)}
	if !out.committed {
		if cls == ClassIdleTimeout {
			// Bytes came (comments, pings) but no event: nothing was sent,
			// so it is the first-byte timeout's case, and retried.
			res.class = ClassTimeout
		}
		return o.with(res)
	}
	res.committed = true
	res.class = midStream(cls)
	x.endStream(w, rc, res.class)
	return o.with(res)
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
