package readiness

import (
	"fmt"
	"math"
	"time"
)

// observation is what one probe saw.
type observation struct {
	// failed is set when the provider could not be probed: unreachable, a
	// timeout, a non-2xx answer. It counts toward FailAfter.
	failed string
	// unusable is set when an upstream provider answered but its metadata
	// cannot be routed on: ambiguous, malformed, inconsistent, too large.
	// It takes the provider out at once.
	unusable string
	// class is the class of failed or unusable (see Status.Class).
	class ReasonClass
	// refused: failed because the connection was refused (Refused).
	refused bool
	// decisive: a failure that takes a ready provider out at once,
	// without waiting for FailAfter: a refused connection confirmed by a
	// second look (a probe the gateway's own refusal triggered, or a
	// feeder's repeated dial). A single failure of any other kind, a
	// timeout above all, only counts toward FailAfter, so a slow box
	// does not flap.
	decisive bool
	// facts are an upstream provider's facts when the probe succeeded.
	facts Facts
	// status is the HTTP status of the probe's last answer (the one that
	// decided the observation); 0 when the upstream never answered
	// (refused, a timeout before the status line).
	status int
}

// healthFailed, metadataFailed and unusableMetadata build the observations
// of a failed probe, each with its class.
func healthFailed(msg string) observation {
	return observation{failed: msg, class: ClassHealthFailed}
}

func metadataFailed(msg string) observation {
	return observation{failed: msg, class: ClassMetadataUnusable}
}

func unusableMetadata(msg string) observation {
	return observation{unusable: msg, class: ClassMetadataUnusable}
}

func (o observation) ok() bool { return o.failed == "" && o.unusable == "" }

func (o observation) message() string {
	if o.unusable != "" {
		return o.unusable
	}
	return o.failed
}

// tracker is one provider's state machine (see the package doc); the
// status it moves between is the entry's published one.
type tracker struct {
	fails    int32 // consecutive failed or unusable probes
	oks      int32 // consecutive successful probes
	wasReady bool  // the provider has been ready at least once
}

func newTracker(upstream bool) tracker {
	// A configured provider starts ready (newEntry).
	return tracker{wasReady: !upstream}
}

// count is n+1, or n at its maximum.
func count(n int32) int32 {
	if n == math.MaxInt32 {
		return n
	}
	return n + 1
}

// apply records o, seen at now, on top of prev, the status before it. It
// returns the status after and reports whether Ready or Facts changed.
func (t *tracker) apply(prev Status, o observation, now time.Time, cfg Config) (Status, bool) {
	s := prev
	s.LastProbe = now
	switch {
	case o.unusable != "":
		t.fails = count(t.fails)
		t.oks = 0
		s.LastError = o.unusable
		s.Ready, s.Reason, s.Class, s.Facts = false, o.unusable, o.class, Facts{}
	case o.failed != "":
		t.fails = count(t.fails)
		t.oks = 0
		s.LastError = o.failed
		if !s.Ready {
			s.Reason, s.Class = o.failed, o.class
		} else if int(t.fails) >= cfg.FailAfter || o.decisive {
			s.Ready, s.Reason, s.Class, s.Facts = false, o.failed, o.class, Facts{}
		}
	default:
		t.oks = count(t.oks)
		t.fails = 0
		switch {
		case s.Ready:
			s.Facts = o.facts // a replaced model takes effect at once
		case !t.wasReady || int(t.oks) >= cfg.RecoverAfter:
			s.Ready, s.Reason, s.Class, s.Facts = true, "", "", o.facts
		default:
			s.Class = ClassRecovering
			s.Reason = fmt.Sprintf("recovering: %d of %d consecutive successful probes (last failure: %s)",
				t.oks, cfg.RecoverAfter, s.LastError)
		}
	}
	if s.Ready {
		t.wasReady = true
	}
	return s, s.Ready != prev.Ready || !s.Facts.Equal(prev.Facts)
}
