package httpbody

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func answer(code int, body string) *http.Response {
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body))}
}

func TestReadOK(t *testing.T) {
	b, err := ReadOK(answer(http.StatusOK, "hello"), 4)
	if err != nil || string(b) != "hell" {
		t.Fatalf("200: %q, %v; want the body cut at the limit", b, err)
	}
	if b, err := ReadOK(answer(http.StatusServiceUnavailable, "busy"), 1<<10); err == nil || err.Error() != "status 503" || b != nil {
		t.Fatalf("503: %q, %v; want the error status 503", b, err)
	}
}
