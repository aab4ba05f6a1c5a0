// Package httpbody reads the bodies of small HTTP answers, capped.
package httpbody

import (
	"fmt"
	"io"
	"net/http"
)

// ReadOK reads resp's body, at most limit bytes, and returns it if the
// status is 200; any other status is the error "status N". The body is read
// first either way, so the connection can be reused; the caller closes it.
func ReadOK(resp *http.Response, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return body, nil
}
