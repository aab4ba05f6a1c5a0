package gateway

import (
	"net/http"
	"strings"
)

// HeaderRequestID is the header that carries a request's id: taken from
// the client when it sends a sane one, else made up, and echoed on every
// response (errors and streams included) and sent upstream.
const HeaderRequestID = "X-Request-Id"

// RequestID returns the client's X-Request-Id when it is a sane token (1 to
// 128 visible ASCII characters), else a new random one. The server sets it
// on every response before any handler runs; the gateway reuses what it
// finds there.
func RequestID(h http.Header) string { return requestID(h) }

// ensureRequestID returns the response's request id, setting one first
// when nothing in front of the gateway did.
func ensureRequestID(w http.ResponseWriter, r *http.Request) string {
	h := w.Header()
	if v := h[HeaderRequestID]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	id := requestID(r.Header)
	h[HeaderRequestID] = []string{id}
	return id
}

// WriteInternalError answers a request whose handler panicked before
// writing anything: 500 internal_error in the client's API shape
// (Anthropic's on /v1/messages, OpenAI's elsewhere). The message says
// nothing of the cause; the log has it, under the request id.
func WriteInternalError(w http.ResponseWriter, r *http.Request) {
	x := exchange{api: apiOf(strings.TrimPrefix(r.URL.Path, "/v1"))}
	x.writeError(w, newError(http.StatusInternalServerError, "internal_error",
		"the gateway failed while handling this request; its log has the details under the request id"))
}
