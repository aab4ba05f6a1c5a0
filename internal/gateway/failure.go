package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class names why an attempt failed. It is the one vocabulary for retry
// decisions, cooldowns, metrics labels, usage records and client error codes.
type Class string

// Failure classes.
const (
	ClassNone            Class = ""
	ClassConnect         Class = "connect_error"    // dial refused, DNS, reset before a response
	ClassTimeout         Class = "timeout"          // first-byte or response-header timeout
	ClassServer          Class = "server_error"     // upstream 5xx
	ClassRateLimited     Class = "rate_limited"     // upstream 429
	ClassRequestTimeout  Class = "request_timeout"  // upstream 408
	ClassCaller          Class = "caller_error"     // upstream 4xx other than 408/429: the request's fault
	ClassClientCancelled Class = "client_cancelled" // the client went away
	ClassStreamBroken    Class = "stream_broken"    // failed after the first byte was sent
	ClassIdleTimeout     Class = "idle_timeout"     // no event within the idle timeout, mid-stream
	ClassCredential      Class = "credential"       // upstream 401: the pool key (or a keyless provider) is refused
	ClassForbidden       Class = "forbidden"        // upstream 403: this key may not do this (model, resource)
	ClassClientSlow      Class = "client_slow"      // the client stopped reading past the client write timeout
	ClassSkipped         Class = "skipped"          // the gateway could not make this target's request; no upstream saw it
	// ClassModelGone: the upstream answered that it does not serve a
	// configured model (404 model_not_found, "does not exist"): the
	// configuration is stale, the caller did nothing wrong.
	ClassModelGone Class = "model_not_served"
)

// verdict is what a failure class means for the request and the upstream.
type verdict struct {
	retry      bool   // try another candidate, if any, before the first byte
	penalise   bool   // counts against the target's breaker
	rateLimit  bool   // cools the key (or keyless target) for Retry-After
	credential bool   // cools the key (or keyless target) for the credential cooldown
	stale      bool   // the target's model is gone: out of routing until a probe lists it
	status     int    // HTTP status when this class ends the request
	clientCode string // stable error code for the client
}

// verdicts is the table that drives failover, cooldowns and errors. Keep
// every decision here, not at the call sites.
var verdicts = map[Class]verdict{
	ClassConnect:         {retry: true, penalise: true, status: http.StatusBadGateway, clientCode: "upstream_unavailable"},
	ClassTimeout:         {retry: true, penalise: true, status: http.StatusGatewayTimeout, clientCode: "upstream_timeout"},
	ClassServer:          {retry: true, penalise: true, status: http.StatusBadGateway, clientCode: "upstream_unavailable"},
	ClassRateLimited:     {retry: true, rateLimit: true, status: http.StatusTooManyRequests, clientCode: "rate_limited"},
	ClassRequestTimeout:  {retry: true, penalise: true, status: http.StatusGatewayTimeout, clientCode: "upstream_timeout"},
	ClassCaller:          {status: 0 /* passed through */, clientCode: "upstream_rejected"},
	ClassClientCancelled: {status: 499, clientCode: "client_cancelled"},
	ClassStreamBroken:    {penalise: true, status: http.StatusBadGateway, clientCode: "upstream_stream_error"},
	ClassIdleTimeout:     {penalise: true, status: http.StatusGatewayTimeout, clientCode: "upstream_timeout"},
	// The operator's key is wrong, not the caller's: another key or target
	// may serve, and the client never sees the upstream's 401.
	ClassCredential: {retry: true, credential: true, status: http.StatusBadGateway, clientCode: "upstream_auth_failed"},
	// A 403 is about the key and the request together (a model the key's
	// project may not use, a WAF or moderation rule on the content), and
	// the caller chooses both: cooling the key, or failing the shared
	// deployment, would let one caller take them out for everyone. Another
	// key is tried; no breaker is touched.
	ClassForbidden: {retry: true, status: http.StatusBadGateway, clientCode: "upstream_auth_failed"},
	// The client's fault: nobody upstream is blamed.
	ClassClientSlow: {status: 499, clientCode: "client_slow"},
	// Our own failure to shape the request for this target: another
	// target may serve, and no breaker learns anything.
	ClassSkipped: {retry: true, status: http.StatusBadGateway, clientCode: "upstream_unavailable"},
	// The configuration is stale, not the caller's request nor the
	// upstream's health: another target may serve; the breaker is left
	// alone (the stale mark takes the target out instead).
	ClassModelGone: {retry: true, stale: true, status: http.StatusServiceUnavailable, clientCode: "model_unavailable"},
}

// A pool member's 404 means one of two things, and only the upstream's own
// structured answer tells them apart:
//
//   - "no such model", naming the model the gateway sent (modelGone), on a
//     target whose model is configured (a route target, a group's
//     model_map, a provider's catalog, discovery): the configuration is
//     stale. ClassModelGone: fail over, take the target out of routing
//     until a probe lists the model again, never relay the answer (it
//     names the upstream's model id).
//   - anything else (an unknown previous_response_id, file or endpoint; a
//     model a caller named on a provider without a catalog; free text):
//     the caller's request. ClassCaller: relayed unchanged, no failover, no
//     breaker touched, as every other 4xx but 401, 403, 408 and 429.
//
// A 404 is never read as the target being down: a caller chooses what it
// names, and must not be able to take a shared target out of routing.

// modelGoneSniff bounds how much of a 4xx body is read to tell a stale
// model from a caller error.
const modelGoneSniff = 8 << 10

// modelGoneStatus: the status with which servers say "no such model"
// (OpenAI, vLLM, SGLang and Anthropic answer 404). A 400 is never read as
// one: its text often echoes the caller's input.
func modelGoneStatus(code int) bool { return code == http.StatusNotFound }

// modelGone reports whether a 404 body says that the model sent, and only
// that, is not served. The error must be structured and name the model:
// OpenAI's code "model_not_found" with the model in its message, or a
// not-found type with the exact message vLLM/SGLang ("The model `m` does
// not exist.") or Anthropic ("model: m") write. Free text is never
// matched: a caller able to make an upstream echo "model not found" (an
// unknown previous_response_id, a bad parameter) must not take a shared
// target out of routing.
func modelGone(status int, body []byte, sent string) bool {
	if !modelGoneStatus(status) || sent == "" {
		return false
	}
	var doc struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    any             `json:"code"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	msg, typ, code := doc.Message, doc.Type, doc.Code
	if len(doc.Error) > 0 && doc.Error[0] == '{' {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		if json.Unmarshal(doc.Error, &inner) != nil {
			return false
		}
		msg, typ, code = inner.Message, inner.Type, inner.Code
	}
	switch {
	case code == "model_not_found":
		return strings.Contains(msg, "`"+sent+"`") || strings.Contains(msg, "'"+sent+"'")
	case typ == "NotFoundError" || typ == "not_found_error" || typ == "invalid_request_error":
		return msg == "The model `"+sent+"` does not exist." || msg == "model: "+sent
	}
	return false
}

// Attempt-context causes, so that a cancelled upstream request can be told
// apart: our own timer, or the client.
var (
	errFirstByteTimeout = errors.New("no first byte within the first-byte timeout")
	errIdleTimeout      = errors.New("no stream event within the idle timeout")
)

// Causes of failed attempts that have no transport error to wrap.
var (
	errNotReady  = errors.New("the provider is not ready (health or metadata) since admission")
	errModelGone = errors.New("the upstream answered that it does not serve the model sent")
	errTooLarge  = errors.New("the response is larger than the gateway's response limit")
	errNotJSON   = errors.New("the response is not JSON")
	errEmpty     = errors.New("the stream ended before its first event")
	// errStreamPanicked ends the attempt of a stream whose relay panicked
	// (leave): the server recovers the panic, the attempt still ends.
	errStreamPanicked = errors.New("the gateway failed while relaying the stream")
)

// statusErr is the cause of an attempt that ended with a failure status;
// the upstream's body is never part of it.
func statusErr(code int) error {
	return fmt.Errorf("the upstream answered %d %s", code, http.StatusText(code))
}

// attemptErr is err with the reason our own timers cancelled the attempt,
// when they did: the transport only says "context canceled".
func attemptErr(err error, attemptCtx context.Context) error {
	c := context.Cause(attemptCtx)
	if c == nil || c == context.Canceled || errors.Is(err, c) {
		return err
	}
	return fmt.Errorf("%w: %w", c, err)
}

// classifyErr maps a transport or read error of an attempt to a class.
// attemptCtx carries the cause set by our timers; clientCtx is the client's
// request context.
func classifyErr(err error, attemptCtx, clientCtx context.Context) Class {
	if clientCtx.Err() != nil {
		return ClassClientCancelled
	}
	switch context.Cause(attemptCtx) {
	case errFirstByteTimeout:
		return ClassTimeout
	case errIdleTimeout:
		return ClassIdleTimeout
	case errDrainCut:
		return ClassConnect // the host is restarting: another target may serve
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	// Everything else (refused, reset, DNS, a dial netguard refused, a
	// connection closed before or while the answer came) means no usable
	// answer from this target.
	return ClassConnect
}

// classifyStatus maps an upstream response status to a class; 2xx and 3xx
// are ClassNone.
func classifyStatus(code int) Class {
	switch {
	case code == http.StatusTooManyRequests:
		return ClassRateLimited
	case code == http.StatusRequestTimeout:
		return ClassRequestTimeout
	case code == http.StatusUnauthorized:
		// The gateway authenticated the caller; the upstream refusing is
		// about the operator's credential.
		return ClassCredential
	case code == http.StatusForbidden:
		return ClassForbidden
	case code >= 500, code >= 300 && code < 400:
		// Redirects are never followed nor relayed: a Location header could
		// reveal internal addresses to the client.
		return ClassServer
	case code >= 400:
		return ClassCaller
	}
	return ClassNone
}

// retryAfter parses a Retry-After header: delta-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
