package gateway

import (
	"bytes"
	"errors"
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
// event. Headers are sent first, so a failure before the first event ends
// as an error event rather than failing over.
func (g *Gateway) relayTranslated(w http.ResponseWriter, r *http.Request, x *exchange, resp *http.Response, wd *watchdog) result {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Rolter-Upstream-Model", x.upstreamModel)
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	first := true
	flush := func() {
		if first {
			x.ttft, first = time.Since(x.start), false
		}
		_ = rc.Flush()
	}
	var (
		u   anthropic.Usage
		err error
		in  io.Reader = progressReader{resp.Body, wd}
	)
	if x.anthropic {
		u, err = anthropic.StreamToAnthropic(w, flush, in, x.model)
	} else {
		u, err = anthropic.StreamToOpenAI(w, flush, in, x.model, x.clientUsage)
	}
	x.promptTokens, x.outputTokens = u.InputTokens, u.OutputTokens
	switch {
	case err == nil:
		return result{status: resp.StatusCode, committed: true}
	case r.Context().Err() != nil:
		return result{class: ClassClientCancelled, status: resp.StatusCode, committed: true}
	}
	return result{class: ClassStreamBroken, status: resp.StatusCode, committed: true}
}
