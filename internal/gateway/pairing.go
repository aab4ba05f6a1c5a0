package gateway

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/store"
)

// clientAPI is the API a client request speaks, as far as reaching an
// upstream of either kind goes. It follows from the endpoint alone.
type clientAPI uint8

const (
	// apiChat is OpenAI chat completions: translatable to the Messages API.
	apiChat clientAPI = iota
	// apiOpenAI is another OpenAI endpoint (completions, embeddings,
	// responses): it has no Messages equivalent and passes through to an
	// upstream of either kind.
	apiOpenAI
	// apiMessages is Anthropic's Messages API, count_tokens included.
	apiMessages
	numAPIs
)

func apiOf(endpoint string) clientAPI {
	switch {
	case endpoint == "/chat/completions":
		return apiChat
	case strings.HasPrefix(endpoint, "/messages"):
		return apiMessages
	}
	return apiOpenAI
}

// pairing is how requests of one client API reach upstreams of one API:
// the analogue of Caddy's reverse-proxy transports. There are four:
// OpenAI→OpenAI and Anthropic→Anthropic pass the request and answer
// through with the model rewritten (one implementation, passThrough);
// OpenAI→Anthropic and Anthropic→OpenAI translate both ways through
// package anthropic (translating). A provider holds its pairing per client
// API, chosen once when the routing table is built (pairingsFor): the
// provider's kind is fixed there, so an attempt indexes an array instead
// of comparing kinds and endpoints again.
//
// The methods run on the request's goroutine and never write the exchange:
// what an attempt learned travels back in its outcome.
type pairing interface {
	// translates reports whether the request changes API shape on the
	// way: translate then prepares the other API's body once per request.
	translates() bool
	// path is the upstream path, under base_url, of a request the client
	// sent to endpoint.
	path(endpoint string) string
	// request is the body target i of x.plan is sent, with model as the
	// upstream model ("": the client's own), under ctx, the attempt's.
	// An error means the request cannot be made in the upstream's shape.
	request(ctx context.Context, x *exchange, i int, model string) (upstreamBody, error)
	// respond answers the client from a whole non-streamed 2xx body and
	// its one scan (scanErr: the body is not a JSON object as far as the
	// model). Nothing reaches the client when it fails.
	respond(c call, body []byte, rs responseSpans, scanErr error) outcome
	// relay streams an event-stream answer. Nothing reaches the client
	// before the first event, so a stream that fails before it can still
	// fail over; after it, a failure ends the stream through endStream.
	relay(ctx context.Context, c call) outcome
}

// pairingsFor is a provider's pairing per client API, by its kind.
func pairingsFor(kind string) *[numAPIs]pairing {
	if kind == store.KindAnthropic {
		return &anthropicPairings
	}
	return &openAIPairings
}

var (
	// The pass-through pairings share their implementation; another OpenAI
	// endpoint sent to an Anthropic upstream is passed through as well
	// (it has nothing to translate to).
	openAIToOpenAI       pairing = passThrough{}
	anthropicToAnthropic pairing = passThrough{}

	openAIPairings    = [numAPIs]pairing{apiChat: openAIToOpenAI, apiOpenAI: openAIToOpenAI, apiMessages: anthropicToOpenAI}
	anthropicPairings = [numAPIs]pairing{apiChat: openAIToAnthropic, apiOpenAI: openAIToOpenAI, apiMessages: anthropicToAnthropic}
)

// upstreamBody is an attempt's request body as the transport takes it.
type upstreamBody struct {
	ctx     context.Context // the attempt's, with whatever tracks the body's writes
	b       []byte
	send    io.ReadCloser
	getBody func() (io.ReadCloser, error)
}

// outcome is how one attempt ended and what it learned, for the exchange
// to record when the attempt is the request's last (forward).
type outcome struct {
	result
	upstreamModel string // the model the upstream answered with, else the one sent (capped)
	ttft          time.Duration
	promptTokens  int
	outputTokens  int
	// tail is a stream past its first event, whose relay and ending
	// serve finishes (finishStream); nil when the attempt ended.
	tail *streamTail
}

// with is o ended by r.
func (o outcome) with(r result) outcome {
	o.result = r
	return o
}

// call is one attempt whose upstream answered 2xx, as its pairing sees it.
type call struct {
	x    *exchange
	w    http.ResponseWriter // the client, through its clientWriter
	r    *http.Request       // the client's request
	resp *http.Response
	wd   *watchdog
	// model is what the answer says the upstream model is: the one sent
	// (capped), until a non-streamed answer names its own.
	model string
}

// outcome is the attempt's outcome so far, ended by r.
func (c call) outcome(r result) outcome { return outcome{result: r, upstreamModel: c.model} }

// passThrough is a pairing whose client and upstream speak the same API:
// the client's body goes with its edits (model, clamp, usage option) made
// in one splice, and the answer comes back with only its model rewritten.
type passThrough struct{}

func (passThrough) translates() bool { return false }

func (passThrough) path(endpoint string) string { return endpoint }

func (passThrough) request(ctx context.Context, x *exchange, i int, model string) (upstreamBody, error) {
	b := x.body.splice(model, x.clampFor(i))
	ctx, send, getBody := x.body.send(ctx, b)
	return upstreamBody{ctx: ctx, b: b, send: send, getBody: getBody}, nil
}

func (passThrough) respond(c call, body []byte, rs responseSpans, scanErr error) outcome {
	status := c.resp.StatusCode
	if scanErr != nil {
		// A 2xx that is not a JSON object (a proxy's HTML page, a truncated
		// body) is an upstream failure, not an answer: fail over or 502.
		return c.outcome(result{class: ClassServer, status: status})
	}
	o := c.outcome(result{status: status, committed: true})
	o.promptTokens, o.outputTokens = rs.usage(body)
	if rs.hasModel {
		// One write of the rewritten body: each write to the client sets
		// its deadline and pauses the watchdog.
		var q [MaxModelLen + 2]byte
		out := getBodyBuf()
		defer putBodyBuf(out)
		body = jsonscan.Splice(out.AvailableBuffer(), body, []jsonscan.Edit{{Start: rs.modelStart, End: rs.modelEnd,
			Value: jsonscan.AppendString(q[:0], c.x.model)}})
	}
	h := c.w.Header()
	copyResponseHeaders(h, c.resp.Header)
	h.Set("X-Rolter-Upstream-Model", o.upstreamModel)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.w.WriteHeader(status)
	_, _ = c.w.Write(body)
	return o
}

func (passThrough) relay(ctx context.Context, c call) outcome { return relay(ctx, c) }
