package gateway

import "time"

// benchAttemptEnd is the metric work at the end of one successful attempt,
// as forward does it.
func benchAttemptEnd(g *Gateway, x *exchange, tg *targetRT) {
	x.upstreamTTFB = time.Millisecond
	g.observeAttempt(x, tg, result{}, x.start)
}
