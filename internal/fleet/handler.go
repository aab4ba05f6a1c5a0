package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// HandlerConfig says how the box-facing endpoints identify a box.
type HandlerConfig struct {
	// ProxyHeader (e.g. "X-Forwarded-For") names a header that carries the
	// box's address when rolter sits behind a reverse proxy. It counts only
	// when the direct peer is in TrustedProxies; otherwise the peer address
	// identifies the box, so a box cannot claim another box's assignment
	// by sending the header itself.
	ProxyHeader    string
	TrustedProxies []netip.Prefix
	// Liveness tunes the batching of last_config_fetch writes
	// (liveness.go). Its Flush interval also bounds how long an unchanged
	// report is not written again (report).
	Liveness LivenessConfig
	// Heartbeat tunes the batching of the reported_at writes of
	// unchanged reports (heartbeat.go).
	Heartbeat HeartbeatConfig
	// HostsChanged, when set, is called after a report changed what a
	// box's /vllm/config says (it applied a revision), so that other
	// replicas reload their directories; this one's is invalidated
	// already. A report changes hosts only, never routing, so a
	// fleet-only announcement is enough.
	HostsChanged func(context.Context)
	// Now is the clock of liveness, the directory's age and reports
	// (default time.Now).
	Now func() time.Time
}

// HandlerStore is the part of store.Store the fleet endpoints use. The
// methods behave as documented on store.Store: FleetKeyByLookup finds only
// unrevoked keys, ListLiveHosts and ListHostsByIP only live hosts, and
// RecordHostReports writes every entry or none. None is called per GET
// /vllm/config in the steady state: the directory and the liveness
// batcher stand between. A report reads its hosts fresh (ListHostsByIP),
// but for an unchanged one, and a heartbeat is written in batches
// (RecordHeartbeats).
type HandlerStore interface {
	DirectoryStore
	LivenessStore
	HeartbeatStore
	ListHostsByIP(ctx context.Context, orgID int64, ip string) ([]store.Host, error)
	RecordHostReports(ctx context.Context, entries []store.HostReportEntry, at time.Time) error
}

// Handler serves GET /vllm/config and POST /vllm/report. The fleet key
// is checked before anything else about a request (method, path, proxy
// header, body), so a caller without one learns nothing but 401.
//
// GET /vllm/config is answered from memory (directory.go) and its
// liveness written in batches (liveness.go), as are the heartbeats of
// unchanged reports (heartbeat.go); run Run for the batches.
type Handler struct {
	st    HandlerStore
	cfg   HandlerConfig
	log   *slog.Logger
	now   func() time.Time
	dir   *Directory
	live  *Liveness
	beats *Heartbeats

	memoMu sync.Mutex
	// memos are, per box address, the last report this replica judged
	// unchanged or wrote (report); pruned when they pass memoPruneAt.
	memos       map[addrKey]*reportMemo
	memoPruneAt int
}

// reportMemo is a report a box sent, as judged or written: the same body
// again, while the directory's hosts at the address are as they were
// (basis: a reload after any announced change reads them afresh) and
// before until, would be judged the same and not written, so it is
// answered without reading the store. After until it is the box's
// heartbeat: the reported_at of ids is queued (heartbeat.go), again
// without reading the store.
type reportMemo struct {
	body     []byte
	basis    string    // reportBasis of the address's hosts in the directory when judged
	until    time.Time // the stored reported_at of its hosts is under the liveness interval old before then
	accepted int
	// ids are the hosts the report was judged to. Their heartbeat moves
	// reported_at only: it clears no apply request (one made since,
	// through another replica, unannounced, waits for a judgement on the
	// store: the directory's reload within its minute changes basis) and
	// never overwrites a report written since.
	ids []int64
}

// maxMemoBody bounds the reports kept in memory (a box's report is well
// under a KiB per host); a larger one is judged from the store each time.
const maxMemoBody = 16 << 10

// NewHandler returns the fleet endpoints over st.
func NewHandler(st HandlerStore, cfg HandlerConfig, log *slog.Logger) *Handler {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Handler{st: st, cfg: cfg, log: log, now: now, dir: NewDirectory(st, now),
		live: NewLiveness(st, cfg.Liveness, now, log), beats: NewHeartbeats(st, cfg.Heartbeat, log),
		memos: map[addrKey]*reportMemo{}, memoPruneAt: 1024}
}

// Generation moves whenever the hosts may have changed (every
// Invalidate): the controller lists hosts for its drain checks only when
// it moved, or while a drain runs.
func (h *Handler) Generation() uint64 { return h.dir.gen.Load() }

// Invalidate makes the next request reload the hosts and fleet keys: call
// it after every write to either (the server does on each snapshot swap
// and after admin writes to hosts and fleet keys).
func (h *Handler) Invalidate() { h.dir.Invalidate() }

// Run writes the batched liveness and heartbeats until ctx ends (then
// what is left of both).
func (h *Handler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.beats.Run(ctx)
	}()
	h.live.Run(ctx)
	wg.Wait()
}

// LastFetch is the latest GET /vllm/config of host id this replica
// served, written to the store yet or not.
func (h *Handler) LastFetch(id int64) (time.Time, bool) { return h.live.Last(id) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	orgID, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	var serve func(http.ResponseWriter, *http.Request, int64, string)
	switch {
	case r.URL.Path == fleetapi.ConfigPath && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		serve = h.config
	case r.URL.Path == fleetapi.ReportPath && r.Method == http.MethodPost:
		serve = h.report
	case r.URL.Path == fleetapi.ConfigPath:
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "use GET")
		return
	case r.URL.Path == fleetapi.ReportPath:
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, codeMethod, "use POST")
		return
	default:
		writeError(w, http.StatusNotFound, codeNotFound, "no such fleet endpoint")
		return
	}
	addr, okIP := h.SourceIP(r)
	if !okIP {
		writeError(w, http.StatusBadRequest, codeBadRequest,
			"the box's address could not be determined: the proxy header is missing, malformed, or names only trusted proxies (--fleet-trusted-proxies must hold proxies, never boxes)")
		return
	}
	serve(w, r, orgID, addr.String())
}

// Error codes of the fleet endpoints.
const (
	codeUnauthorized = "unauthorized"
	codeUnavailable  = "store_unavailable"
	codeBadRequest   = "invalid_request"
	codeBadReport    = "invalid_report"
	codeMethod       = "method_not_allowed"
	codeNotFound     = "not_found"
	codeInternal     = "internal_error"
)

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// writeFieldErrors answers 400 naming each bad field; messages never
// quote the values.
func writeFieldErrors(w http.ResponseWriter, code, msg string, fields map[string]string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": code, "message": msg, "fields": fields}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// SourceIP is the address that identifies the box behind r.
func (h *Handler) SourceIP(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	peer := ap.Addr().Unmap()
	if h.cfg.ProxyHeader == "" || !h.trusted(peer) {
		return peer, true
	}
	// The header's right end was written by our proxy; walk left past
	// trusted hops to the first address a trusted proxy saw connect.
	var hops []string
	for _, v := range r.Header.Values(h.cfg.ProxyHeader) {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.Addr{}, false
		}
		a = a.Unmap()
		if !h.trusted(a) {
			return a, true
		}
	}
	// Every address is a trusted proxy: the box is unknown. Answering for
	// the proxy's address would hand a box the wrong (or an empty)
	// assignment, so refuse.
	return netip.Addr{}, false
}

func (h *Handler) trusted(a netip.Addr) bool {
	for _, p := range h.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// authenticate returns the org of the fleet key in r; ok is false after it
// has answered. It reads nothing of r but the key and the peer address
// (for the log), so it can run before every other check.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (orgID int64, ok bool) {
	token, _ := secret.Bearer(r.Header.Get("Authorization"))
	refuse := func(why string) (int64, bool) {
		// The token is never logged, not even in part; the peer is the
		// direct connection (the box's own address is resolved only for
		// a caller with a key).
		h.log.Warn("fleet key refused", "peer", r.RemoteAddr, "path", r.URL.Path, "why", why)
		w.Header().Set("WWW-Authenticate", `Bearer realm="rolter-fleet"`)
		writeError(w, http.StatusUnauthorized, codeUnauthorized, "a valid fleet key is required: send Authorization: Bearer <fleet key>")
		return 0, false
	}
	lookup, okTok := secret.Lookup(secret.PrefixFleetKey, token)
	if !okTok {
		return refuse("malformed or missing")
	}
	k, err := h.dir.fleetKey(r.Context(), lookup)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse("unknown or revoked")
	case err != nil:
		h.storeError(w, r, err)
		return 0, false
	}
	if !k.Hash.Equal(secret.HashOf(token)) {
		return refuse("wrong secret")
	}
	return k.OrgID, true
}

func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		h.log.Error("fleet endpoint: store unavailable", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the store is unavailable; keep serving from local state and retry")
		return
	}
	h.log.Error("fleet endpoint failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, codeInternal, "internal error")
}

// config answers a box with its assignments, from the directory, and
// records the fetch for the liveness batch. An IP with no hosts gets an
// empty list: the box waits for an operator.
func (h *Handler) config(w http.ResponseWriter, r *http.Request, orgID int64, ip string) {
	hosts, body, err := h.dir.hostsAt(r.Context(), orgID, ip)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if len(hosts) == 0 {
		h.log.Info("fleet config fetched by an address with no hosts", "ip", ip)
		writeJSON(w, http.StatusOK, fleetapi.Config{IP: ip, Assignments: []fleetapi.Assignment{}})
		return
	}
	now, flush := h.now(), false
	for i := range hosts {
		if h.live.Seen(hosts[i].ID, now) {
			flush = true
		}
	}
	if flush {
		h.live.Flush(r.Context()) // a failure is logged and retried; the box still gets its answer
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// report records what a box applied and discovered, for its own hosts
// only. The report is checked whole first (ParseReport: bounds, unknown
// fields, one entry per host); a bad one is refused with 400 and nothing
// is written. A good one is written in one transaction.
//
// The hosts are read from the store, not the directory: what a report
// writes (the applied assignment, clearing the apply request) is decided
// on the hosts as they are now, so an apply requested through another
// replica, whose announcement has not reached this one yet, is not
// cleared by a report of the revision before it. The agent reports after
// every fetch; a report that says what is stored already, stored less than
// nine tenths of a liveness interval ago (heartbeatDue), is not written
// again.
func (h *Handler) report(w http.ResponseWriter, r *http.Request, orgID int64, ip string) {
	// The report ends the box's cycle (fetch, then report): the
	// connection is closed after it rather than kept idle until the next
	// cycle, which costs the gateway a descriptor, a goroutine and about
	// 27 KB of buffers and stack per box for as long as it waits.
	w.Header().Set("Connection", "close")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fleetapi.MaxReportBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeFieldErrors(w, codeBadReport, "the report is too large", map[string]string{"": fmt.Sprintf("the body is over %d bytes", fleetapi.MaxReportBody)})
			return
		}
		writeError(w, http.StatusBadRequest, codeBadRequest, "the body could not be read")
		return
	}
	key, now := addrKey{orgID, ip}, h.now()
	basis, known := h.dir.reportBasisAt(r.Context(), orgID, ip)
	if m := h.memo(key); known && m != nil && m.basis == basis && bytes.Equal(m.body, body) {
		// The same report again, its hosts as they were: their reports
		// stored under an interval ago, nothing to write; else the
		// heartbeat's reported_at, queued for the next batch.
		if h.heartbeatDue(m.until, now) {
			if !h.beats.Beat(m.ids, now) { // shutting down: written here
				if err := h.st.RecordHeartbeats(r.Context(), heartbeatsOf(m.ids, now)); err != nil {
					h.storeError(w, r, err)
					return
				}
			}
			next := *m
			next.until = now.Add(h.live.cfg.Flush)
			h.remember(key, &next, now)
		}
		writeJSON(w, http.StatusOK, map[string]int{"accepted": m.accepted})
		return
	}
	rep, fe := fleetapi.ParseReport(body)
	if fe != nil {
		h.log.Warn("fleet report refused", "ip", ip, "fields", len(fe))
		writeFieldErrors(w, codeBadReport, "the report is invalid; nothing was recorded", fe)
		return
	}
	hosts, err := h.st.ListHostsByIP(r.Context(), orgID, ip)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	byID := make(map[int64]*store.Host, len(hosts))
	for i := range hosts {
		byID[hosts[i].ID] = &hosts[i]
	}
	entries := make([]store.HostReportEntry, 0, len(rep.Applied))
	changed := false // what a /vllm/config says changes: reload the directories
	write := false   // what is stored differs, or was stored long ago
	fresh := now     // the oldest stored reported_at of the report's hosts, when not written
	for _, a := range rep.Applied {
		host := byID[a.HostID]
		if host == nil {
			continue // not this box's host (retired, or another address)
		}
		current := Revision(host)
		e := store.HostReportEntry{HostID: host.ID, Applied: a.Revision,
			Report: store.HostReport{Discovered: rep.Discovered, Error: a.Error, Download: a.Download, Fit: a.Fit, GPUs: a.GPUs, KVCache: a.KVCache}}
		if a.Revision == current {
			e.Current = &store.AppliedAssignment{Revision: current, Port: host.Port, Recipe: host.Recipe}
			changed = changed || host.ApplyRequested
		}
		changed = changed || a.Revision != host.AppliedRevision
		write = write || !h.stored(host, &e, now)
		if host.ReportedAt != nil && host.ReportedAt.Before(fresh) {
			fresh = *host.ReportedAt
		}
		entries = append(entries, e)
		if a.Revision != "" && a.Revision != current {
			h.log.Info("fleet host runs an older revision", "host", host.ID, "applied", a.Revision, "current", current)
		}
	}
	if write {
		if err := h.st.RecordHostReports(r.Context(), entries, now); err != nil {
			h.storeError(w, r, err)
			return
		}
	}
	if changed {
		h.dir.Invalidate()
		if h.cfg.HostsChanged != nil {
			h.cfg.HostsChanged(r.Context())
		}
		// The directory reloads the hosts as just written: judged on
		// them, the same report again is unchanged, so the box's first
		// heartbeat needs no store read either. Anything else that
		// changed meanwhile gives the reload another basis, which no
		// memo matches.
		basis, known = basisAfter(hosts, entries), true
	}
	if known && len(body) <= maxMemoBody {
		if write {
			fresh = now
		}
		ids := make([]int64, len(entries))
		for i, e := range entries {
			ids[i] = e.HostID
		}
		h.remember(key, &reportMemo{body: bytes.Clone(body), basis: basis, until: fresh.Add(h.live.cfg.Flush),
			accepted: len(entries), ids: ids}, now)
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": len(entries)})
}

// heartbeatsOf is the heartbeat at at of hosts ids.
func heartbeatsOf(ids []int64, at time.Time) []store.Heartbeat {
	beats := make([]store.Heartbeat, len(ids))
	for i, id := range ids {
		beats[i] = store.Heartbeat{HostID: id, At: at}
	}
	return beats
}

// basisAfter is reportBasis of hosts (ListHostsByIP: the live hosts at
// an address, by id, as the directory lists them) once entries are
// written (RecordHostReports).
func basisAfter(hosts []store.Host, entries []store.HostReportEntry) string {
	after := slices.Clone(hosts)
	for _, e := range entries {
		for i := range after {
			if after[i].ID != e.HostID {
				continue
			}
			after[i].AppliedRevision = e.Applied
			if e.Current != nil {
				after[i].Applied = e.Current
				after[i].ApplyRequested = false
			}
		}
	}
	return reportBasis(after)
}

func (h *Handler) memo(k addrKey) *reportMemo {
	h.memoMu.Lock()
	defer h.memoMu.Unlock()
	return h.memos[k]
}

// remember keeps m as k's last report. The memos are pruned whenever
// their count doubles of those expired a liveness interval ago or more
// (a box that reports keeps its memo for its heartbeat), so they follow
// the live boxes.
func (h *Handler) remember(k addrKey, m *reportMemo, now time.Time) {
	h.memoMu.Lock()
	defer h.memoMu.Unlock()
	h.memos[k] = m
	if len(h.memos) < h.memoPruneAt {
		return
	}
	for k, m := range h.memos {
		if !now.Before(m.until.Add(h.live.cfg.Flush)) {
			delete(h.memos, k)
		}
	}
	h.memoPruneAt = max(1024, 2*len(h.memos))
}

// stored reports whether writing e would change nothing of host but its
// reported_at, which is not due again yet (heartbeatDue).
func (h *Handler) stored(host *store.Host, e *store.HostReportEntry, now time.Time) bool {
	if host.ReportedAt == nil || now.Before(*host.ReportedAt) || h.heartbeatDue(host.ReportedAt.Add(h.live.cfg.Flush), now) {
		return false
	}
	if e.Applied != host.AppliedRevision || !sameJSON(e.Report, host.Report) {
		return false
	}
	return e.Current == nil || (!host.ApplyRequested && host.Applied != nil && sameJSON(e.Current, host.Applied))
}

// heartbeatDue reports whether a report at now writes reported_at again,
// the stored one going stale at until (a liveness interval after it). It
// is due a tenth of an interval early (6 s of a minute): the agent's
// heartbeat comes an interval after the report it sent, timed from before
// that report reached the gateway, and one landing just before until,
// answered without a write, would leave reported_at to age almost two
// intervals; so it lags about one heartbeat at most. Reports sent more
// often than that (news, changes) are still not written for nothing.
func (h *Handler) heartbeatDue(until, now time.Time) bool {
	return !now.Before(until.Add(-h.live.cfg.Flush / 10))
}

// sameJSON reports whether a and b encode alike, as the store keeps them.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
