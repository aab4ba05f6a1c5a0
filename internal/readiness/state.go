package readiness

import (
	"fmt"
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

// tracker is one provider's state machine (see the package doc).
type tracker struct {
	status   Status
	fails    int  // consecutive failed or unusable probes
	oks      int  // consecutive successful probes
	wasReady bool // the provider has been ready at least once
}

func newTracker(upstream bool) tracker {
	if upstream {
		return tracker{status: Status{Reason: ReasonNoProbe, Class: ClassNotProbed}}
	}
	// Optimistic: the gateway's passive health covers a configured provider
	// until the first probe.
	return tracker{status: Status{Ready: true}, wasReady: true}
}

// apply records o, seen at now, and reports whether Ready or Facts changed.
func (t *tracker) apply(o observation, now time.Time, cfg Config) bool {
	prev := t.status
	s := prev
	s.LastProbe = now
	switch {
	case o.unusable != "":
		t.fails++
		t.oks = 0
		s.LastError = o.unusable
		s.Ready, s.Reason, s.Class, s.Facts = false, o.unusable, o.class, Facts{}
	case o.failed != "":
		t.fails++
		t.oks = 0
		s.LastError = o.failed
		if !s.Ready {
			s.Reason, s.Class = o.failed, o.class
		} else if t.fails >= cfg.FailAfter || o.decisive {
			s.Ready, s.Reason, s.Class, s.Facts = false, o.failed, o.class, Facts{}
		}
	default:
		t.oks++
		t.fails = 0
		switch {
		case s.Ready:
			s.Facts = o.facts // a replaced model takes effect at once
		case !t.wasReady || t.oks >= cfg.RecoverAfter:
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
	t.status = s
	return s.Ready != prev.Ready || !s.Facts.Equal(prev.Facts)
}
