package gateway

import (
	"errors"
	"net/http"
	"os"
	"time"
)

// clientWriter is the client's side of an exchange. Every write and flush
// gets its own deadline (ClientWriteTimeout), so a client that stops
// reading is cut off instead of holding the request, and the time spent
// waiting on the client is kept out of the attempt's watchdog, which
// measures the upstream only: a slow client never cools a healthy
// upstream.
type clientWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// wd is the running attempt's watchdog; nil between attempts.
	wd       *watchdog
	deadline time.Time
	armed    bool // a write deadline is set on the connection
	slow     bool // a write missed its deadline: the client stopped reading
}

func newClientWriter(w http.ResponseWriter, timeout time.Duration) *clientWriter {
	return &clientWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (c *clientWriter) Write(b []byte) (int, error) {
	c.begin()
	n, err := c.ResponseWriter.Write(b)
	return n, c.end(err)
}

// FlushError is what http.ResponseController.Flush calls.
func (c *clientWriter) FlushError() error {
	c.begin()
	return c.end(c.rc.Flush())
}

func (c *clientWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *clientWriter) begin() {
	if c.wd != nil {
		c.wd.pause()
	}
	c.deadline = time.Now().Add(c.timeout)
	if c.rc.SetWriteDeadline(c.deadline) == nil {
		c.armed = true
	}
}

func (c *clientWriter) end(err error) error {
	if c.wd != nil {
		c.wd.resume()
	}
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(c.deadline)) {
		c.slow = true
	}
	return err
}

// done gives the bytes net/http writes after the handler returns (the last
// buffered ones, a stream's terminator) one more write timeout: never no
// deadline, so a client that stops reading cannot hold the connection. The
// next request on a kept-alive connection sets its own (rolter serve's
// writeDeadline).
func (c *clientWriter) done() {
	if c.armed && !c.slow {
		_ = c.rc.SetWriteDeadline(time.Now().Add(c.timeout))
	}
}
