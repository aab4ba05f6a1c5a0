package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// apiError is an OpenAI-shaped error: {"error":{"message","type","param","code"}}.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
	// retryAfter, when set, becomes a Retry-After header (seconds).
	retryAfter int
}

func newError(status int, code, msg string) *apiError {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "api_error"
	}
	return &apiError{status: status, Message: msg, Type: typ, Code: code}
}

// errUnauthorized is the one answer for a missing, unknown, revoked or
// expired key: the body must not tell them apart.
var errUnauthorized = newError(http.StatusUnauthorized, "unauthorized",
	"invalid or missing API key: send a rolter virtual key as Authorization: Bearer <key> or x-api-key")

// writeError answers with e in OpenAI's shape.
func writeError(w http.ResponseWriter, e *apiError) {
	writeErrorBody(w, e, map[string]*apiError{"error": e})
}

// writeErrorBody answers with e's status and Retry-After, and body (e in
// one API's shape) as JSON.
func writeErrorBody(w http.ResponseWriter, e *apiError, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	w.WriteHeader(e.status)
	b, _ := json.Marshal(body)
	_, _ = w.Write(append(b, '\n'))
}

// sseError is the event that ends a stream that broke after its first
// byte: well-formed, so clients see a failure rather than a clean end.
func sseError(code, msg string) []byte {
	b, _ := json.Marshal(map[string]*apiError{"error": {Message: msg, Type: "api_error", Code: code}})
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// writeError answers in the client's API shape: Anthropic's on
// /v1/messages, OpenAI's elsewhere.
func (x *exchange) writeError(w http.ResponseWriter, e *apiError) {
	if x.api != apiMessages {
		writeError(w, e)
		return
	}
	writeErrorBody(w, e, anthropicError(e))
}

// anthropicTypes maps a status to Anthropic's error type; any other status
// is an api_error.
var anthropicTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusServiceUnavailable:    "overloaded_error",
}

// anthropicError is {"type":"error","error":{"type","message"}}, with the
// stable code added.
func anthropicError(e *apiError) any {
	typ, ok := anthropicTypes[e.status]
	if !ok {
		typ = "api_error"
	}
	return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": e.Message, "code": e.Code}}
}

// midStream is the class of a stream that failed after its first byte
// reached the client, given how the attempt's read failed: the client's
// leaving and the idle timeout keep their classes, and everything else (a
// reset, an early end, an upstream error event, data that cannot be
// translated) is a broken stream. Nothing mid-stream is retried.
func midStream(cls Class) Class {
	switch cls {
	case ClassClientCancelled, ClassClientSlow, ClassIdleTimeout:
		return cls
	}
	return ClassStreamBroken
}

// streamMessages are the fixed messages of the stream-ending events: the
// upstream's own error text never reaches the client.
var streamMessages = map[Class]string{
	ClassStreamBroken: "the upstream stream broke before it finished",
	ClassIdleTimeout:  "the upstream sent no event within the idle timeout",
}

// endStream is the one way a stream that failed after its first byte ends,
// whatever the pairing of client API and upstream: a well-formed error
// event in the client's API shape with the class's stable code and a fixed
// message, and no terminator ([DONE], message_stop), so clients see a
// failure rather than a clean end. A client that left gets nothing more.
func (x *exchange) endStream(w io.Writer, rc *http.ResponseController, cls Class) {
	msg, ok := streamMessages[cls]
	if !ok {
		return
	}
	if _, err := w.Write(x.streamError(verdicts[cls].clientCode, msg)); err == nil {
		_ = rc.Flush()
	}
}

// streamError is the final event of a stream that broke after its first
// byte, in the client's API shape.
func (x *exchange) streamError(code, msg string) []byte {
	if x.api != apiMessages {
		return sseError(code, msg)
	}
	b, _ := json.Marshal(anthropicError(&apiError{status: http.StatusBadGateway, Message: msg, Code: code}))
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}
