package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
)

var errUnauthorized = errors.New("fleet key refused")

// fetch gets the box's configuration.
func (a *Agent) fetch(ctx context.Context) (*fleetapi.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.server+fleetapi.ConfigPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.FleetKey.Reveal())
	req.Header.Set("Accept", "application/json")
	// A fetch that no report is due to follow (reportDue) ends the
	// cycle unless the answer brings news: the connection is closed
	// after it rather than left idle at the gateway until the next one.
	// A report that does follow dials again.
	req.Close = !a.reportDue(time.Now())
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, errUnauthorized
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("GET %s: %s: redirects are not followed (the fleet key goes to the gateway only); set --server to the address it redirects to", fleetapi.ConfigPath, resp.Status)
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("GET %s: %s", fleetapi.ConfigPath, resp.Status)
	}
	var cfg fleetapi.Config
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxConfigBody)).Decode(&cfg); err != nil {
		return nil, fmt.Errorf("GET %s: malformed body: %w", fleetapi.ConfigPath, err)
	}
	return &cfg, nil
}

// reportDue reports whether the next report goes out even if it says
// what the last one did: none was accepted yet, or the heartbeat is due.
func (a *Agent) reportDue(now time.Time) bool {
	return a.sent == nil || now.Before(a.sentAt) || now.Sub(a.sentAt) >= a.reportEvery
}

// judged encodes what of r says whether it changed: all of it but the
// free disk space, which moves on any busy disk (in tenths of a GB) and
// would make every report a change. It is still sent, in each report and
// heartbeat.
func judged(r fleetapi.Report) ([]byte, error) {
	r.Discovered.DiskFreeGB = 0
	return json.Marshal(r)
}

// report posts what runs and what the box sees, when that changed since
// the last report the gateway accepted, when news (the fetched
// configuration changed: an apply request, a drain, a new revision, which
// the gateway may wait to see acknowledged), or as a heartbeat once
// reportEvery has passed. In the steady state a box so sends one request
// per interval, not two; the gateway learns every change at the fetch
// after it, and an unchanged state once a minute, which is how often it
// would write it anyway (its liveness interval).
func (a *Agent) report(ctx context.Context, desired []fleetapi.Assignment, hw hardware, news bool) {
	r := fleetapi.Report{Applied: make([]fleetapi.Applied, 0, len(desired)), Discovered: hw.discovered()}
	for _, as := range desired {
		ap := fleetapi.Applied{HostID: as.HostID}
		if !hw.SMIFound {
			ap.Fit = fleetapi.FitUnchecked
		}
		var errs []string
		if c := a.children[as.HostID]; c != nil {
			ap.Fit, ap.GPUs, ap.KVCache = c.place.Fit, c.place.GPUs, c.kv.snapshot()
			if pid, why := c.running(); pid != 0 {
				ap.Revision = c.a.Revision
				if r.Discovered.VLLMVersion == "" {
					r.Discovered.VLLMVersion = c.probeVersion(ctx, a.local)
				}
			} else {
				errs = append(errs, why)
			}
		}
		if e := a.errs[as.HostID]; e != "" {
			errs = append(errs, e)
		}
		if j := a.waiting[as.HostID]; j != nil && !j.finished() {
			ap.Download = j.prog.wire()
			msg := j.prog.String()
			if ap.Revision != "" && ap.Revision != revisionOf(as) {
				msg = "revision " + revisionOf(as) + " not applied yet (still running " + ap.Revision + "): " + msg
			}
			errs = append(errs, msg)
		}
		ap.Error = strings.Join(errs, "; ")
		r.Applied = append(r.Applied, ap)
	}
	r.Clip() // within the gateway's bounds, or it refuses the whole report
	enc, err := judged(r)
	if err != nil {
		a.log.Error("encode report", "error", err)
		return
	}
	now := time.Now()
	if !news && !a.reportDue(now) && bytes.Equal(enc, a.sent) {
		return
	}
	a.sent = nil // until this one is accepted
	if a.legacyReports > 0 {
		a.legacyReports--
		r = legacyReport(r)
	}
	status, body := a.postReport(ctx, r)
	if status == http.StatusBadRequest && hasExtensions(r) && namesUnknownField(body) {
		// A gateway older than the optional applied[] fields (download,
		// fit, gpus, kv_cache) refuses them as unknown: send the report
		// again without them (its error still says "downloading ..."),
		// and keep to that for a while.
		if a.legacyReports == 0 {
			a.log.Info("the gateway does not know the download, fit and kv-cache report fields; reporting without them (upgrade the gateway to see them)")
		}
		a.legacyReports = legacyReportRun
		status, _ = a.postReport(ctx, legacyReport(r))
	}
	switch status {
	case 0:
	case http.StatusOK, http.StatusNoContent:
		a.sent, a.sentAt = enc, now
		a.log.Debug("reported", "applied", len(r.Applied))
	case http.StatusUnauthorized, http.StatusForbidden:
		a.log.Error("fleet key refused by the gateway; check ROLTER_FLEET_KEY", "server", a.server)
	default:
		a.log.Warn("report failed", "status", strconv.Itoa(status)+" "+http.StatusText(status))
	}
}

// legacyReportRun is how many reports go without the optional applied[]
// fields after a gateway refused them, before they are tried again (an
// upgraded gateway sees them within this many intervals).
const legacyReportRun = 60

// hasExtensions reports whether r carries a field an older gateway
// refuses.
func hasExtensions(r fleetapi.Report) bool {
	for _, ap := range r.Applied {
		if ap.Download != nil || ap.Fit != "" || ap.GPUs != nil || ap.KVCache != nil {
			return true
		}
	}
	return false
}

// legacyReport is r without the optional applied[] fields: what a gateway
// from before them accepts.
func legacyReport(r fleetapi.Report) fleetapi.Report {
	out := r
	out.Applied = make([]fleetapi.Applied, len(r.Applied))
	for i, ap := range r.Applied {
		out.Applied[i] = fleetapi.Applied{HostID: ap.HostID, Revision: ap.Revision, Error: ap.Error}
	}
	return out
}

// namesUnknownField reports whether a 400 answer refuses a field as
// unknown.
func namesUnknownField(body string) bool {
	var e struct {
		Error struct {
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil {
		return false
	}
	for _, msg := range e.Error.Fields {
		if msg == "unknown field" {
			return true
		}
	}
	return false
}

// postReport sends r and returns the status and the start of the answer;
// status 0 when no answer came (logged here).
func (a *Agent) postReport(ctx context.Context, r fleetapi.Report) (int, string) {
	body, err := json.Marshal(r)
	if err != nil {
		a.log.Error("encode report", "error", err)
		return 0, ""
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.server+fleetapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.FleetKey.Reveal())
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("report failed", "error", err)
		}
		return 0, ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, string(b)
}
