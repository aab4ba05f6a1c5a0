package gateway

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
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
	// project may not use, a WAF rule), and the client chooses the model on
	// provider addresses: cooling the key for everyone would let one caller
	// take a whole pool out. Another key is tried, and the deployment (this
	// provider and model) takes an ordinary failure.
	ClassForbidden: {retry: true, penalise: true, status: http.StatusBadGateway, clientCode: "upstream_auth_failed"},
	// The client's fault: nobody upstream is blamed.
	ClassClientSlow: {status: 499, clientCode: "client_slow"},
	// The configuration is stale, not the caller's request nor the
	// upstream's health: another target may serve; the breaker is left
	// alone (the stale mark takes the target out instead).
	ClassModelGone: {retry: true, stale: true, status: http.StatusServiceUnavailable, clientCode: "model_unavailable"},
}

// modelGoneSniff bounds how much of a 4xx body is read to tell a stale
// model from a caller error.
const modelGoneSniff = 8 << 10

// modelGoneStatus: the statuses with which servers say "no such model"
// (OpenAI, vLLM and SGLang answer 404; older vLLM answered 400).
func modelGoneStatus(code int) bool {
	return code == http.StatusNotFound || code == http.StatusBadRequest
}

// modelGone reports whether an upstream error body says the model is not
// served: OpenAI's code "model_not_found", the "The model `x` does not
// exist" message of OpenAI, vLLM and SGLang, or a 404 saying a model is
// not found.
func modelGone(status int, body []byte) bool {
	b := bytes.ToLower(body)
	if bytes.Contains(b, []byte("model_not_found")) {
		return true
	}
	if !bytes.Contains(b, []byte("model")) {
		return false
	}
	return bytes.Contains(b, []byte("does not exist")) || status == http.StatusNotFound && bytes.Contains(b, []byte("not found"))
}

// Attempt-context causes, so that a cancelled upstream request can be told
// apart: our own timer, or the client.
var (
	errFirstByteTimeout = errors.New("no first byte within the first-byte timeout")
	errIdleTimeout      = errors.New("no stream event within the idle timeout")
)

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
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return ClassConnect
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return ClassConnect
	}
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
