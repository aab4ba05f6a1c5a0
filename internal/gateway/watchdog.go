package gateway

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// watchdog cancels an attempt that goes quiet: first with the first-byte
// timeout, then, once data flows, with the idle timeout between events.
type watchdog struct {
	t         *time.Timer
	started   atomic.Bool
	stopped   bool // by the request's goroutine: resume must not re-arm it
	firstByte time.Duration
	idle      time.Duration
}

func newWatchdog(firstByte, idle time.Duration, cancel context.CancelCauseFunc) *watchdog {
	wd := &watchdog{firstByte: firstByte, idle: idle}
	wd.t = time.AfterFunc(firstByte, func() {
		if wd.started.Load() {
			cancel(errIdleTimeout)
		} else {
			cancel(errFirstByteTimeout)
		}
	})
	return wd
}

// progress records data: the idle timeout restarts.
func (wd *watchdog) progress() {
	wd.started.Store(true)
	wd.t.Reset(wd.idle)
}

func (wd *watchdog) stop() {
	wd.stopped = true
	wd.t.Stop()
}

// pause and resume bracket a write to the client: waiting on the client is
// not upstream silence.
func (wd *watchdog) pause() { wd.t.Stop() }

func (wd *watchdog) resume() {
	if wd.stopped {
		return
	}
	if wd.started.Load() {
		wd.t.Reset(wd.idle)
	} else {
		wd.t.Reset(wd.firstByte)
	}
}

// progressReader reports every successful read to the watchdog.
type progressReader struct {
	r  io.Reader
	wd *watchdog
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.wd.progress()
	}
	return n, err
}
