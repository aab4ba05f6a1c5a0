package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

const hostCols = `id, org_id, project_id, ip, port, model_name, api_key, recipe, notes, state, auto_apply, apply_requested,
	applied_revision, report, reported_at, last_config_fetch, provider_id, created_at, updated_at, retired_at,
	COALESCE((SELECT p.slug FROM providers p WHERE p.id = hosts.provider_id), ''), applied_assignment,
	drain_timeout_s, drain_started_at, drain_deadline, drained_at, hf_token`

// scanHost reads a host row; the API key is opened with the store's
// sealer.
func (s *DB) scanHost(sc interface{ Scan(...any) error }) (store.Host, error) {
	var (
		h                         store.Host
		key, recipe, report       string
		hfToken                   string
		applied                   string
		reported, fetched, retire sql.NullTime
		provider                  sql.NullInt64
		drainSecs                 int64
		drainStart, drainDeadline sql.NullTime
		drained                   sql.NullTime
	)
	if err := sc.Scan(&h.ID, &h.OrgID, &h.ProjectID, &h.IP, &h.Port, &h.ModelName, &key, &recipe, &h.Notes, &h.State,
		&h.AutoApply, &h.ApplyRequested, &h.AppliedRevision, &report, &reported, &fetched, &provider,
		&h.CreatedAt, &h.UpdatedAt, &retire, &h.ProviderSlug, &applied,
		&drainSecs, &drainStart, &drainDeadline, &drained, &hfToken); err != nil {
		return h, err
	}
	h.DrainTimeout = time.Duration(drainSecs) * time.Second
	if drainStart.Valid && drainDeadline.Valid {
		h.Drain = &store.HostDrain{StartedAt: drainStart.Time.UTC(), Deadline: drainDeadline.Time.UTC(), DrainedAt: nullTime(drained)}
	}
	h.CreatedAt, h.UpdatedAt = h.CreatedAt.UTC(), h.UpdatedAt.UTC()
	h.ReportedAt, h.LastConfigFetch, h.RetiredAt = nullTime(reported), nullTime(fetched), nullTime(retire)
	h.ProviderID = provider.Int64
	var err error
	if h.APIKey, err = s.sealer.Open(key); err != nil {
		return h, fmt.Errorf("store: host %d: api key: %w", h.ID, err)
	}
	if hfToken != "" {
		if h.HFToken, err = s.sealer.Open(hfToken); err != nil {
			return h, fmt.Errorf("store: host %d: hf token: %w", h.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(recipe), &h.Recipe); err != nil {
		return h, fmt.Errorf("store: host %d: recipe column: %w", h.ID, err)
	}
	if err := json.Unmarshal([]byte(report), &h.Report); err != nil {
		return h, fmt.Errorf("store: host %d: report column: %w", h.ID, err)
	}
	if applied != "" {
		h.Applied = &store.AppliedAssignment{}
		if err := json.Unmarshal([]byte(applied), h.Applied); err != nil {
			return h, fmt.Errorf("store: host %d: applied_assignment column: %w", h.ID, err)
		}
	}
	return h, nil
}

// CreateHost implements store.Store.
func (s *DB) CreateHost(ctx context.Context, h *store.Host, check store.PoolCheck) error {
	t := now()
	hostDefaults(h)
	return s.tx(ctx, func(tx querier) error {
		if err := s.checkPool(ctx, tx, h, check); err != nil {
			return err
		}
		return s.insertHost(ctx, tx, h, t)
	})
}

// hostDefaults fills a new host's unset state and drain timeout.
func hostDefaults(h *store.Host) {
	if h.State == "" {
		h.State = store.HostPending
	}
	if h.DrainTimeout <= 0 {
		h.DrainTimeout = store.DefaultDrainTimeout
	}
}

// insertHost inserts h created at t and sets its id and timestamps.
func (s *DB) insertHost(ctx context.Context, tx querier, h *store.Host, t time.Time) error {
	id, err := s.insert(ctx, tx, "host address",
		`INSERT INTO hosts (org_id, project_id, ip, port, model_name, api_key, recipe, notes, state, auto_apply, drain_timeout_s, hf_token, created_at, updated_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		h.OrgID, h.ProjectID, h.IP, h.Port, h.ModelName, s.sealer.Seal(h.APIKey), jsonText(h.Recipe), h.Notes, h.State,
		h.AutoApply, drainSeconds(h.DrainTimeout), s.sealOptional(h.HFToken), t, t)
	if err != nil {
		return err
	}
	h.ID, h.CreatedAt, h.UpdatedAt = id, t, t
	return nil
}

// CreateHosts implements store.Store: one transaction, the org locked
// first, then each pool locked and read once for the batch.
func (s *DB) CreateHosts(ctx context.Context, hs []*store.Host, check store.PoolJoinCheck) error {
	t := now()
	for _, h := range hs {
		hostDefaults(h)
	}
	return s.tx(ctx, func(tx querier) error {
		if err := s.lockOrgs(ctx, tx, hs); err != nil {
			return err
		}
		if check != nil {
			if err := s.checkPools(ctx, tx, hs, check); err != nil {
				return err
			}
		}
		for i, h := range hs {
			if err := s.insertHost(ctx, tx, h, t); err != nil {
				return &store.EntryError{Index: i, Err: err}
			}
		}
		return nil
	})
}

// lockOrgs locks the rows of the orgs hs belong to, in id order, on
// PostgreSQL. The project locks of checkPools serialise a pool's writes,
// but the unique index on a live host's address (hosts_live_address) is
// org-wide: two batches into different projects that share addresses,
// inserted in opposite orders, would each wait on the other's rows until
// PostgreSQL aborted one as a deadlock. With the org locked first, the
// later batch waits for the earlier and then fails on the address it
// shares. FOR NO KEY UPDATE conflicts with itself and with CreateFleetKey's
// FOR UPDATE, but not with the key-share locks that inserts referencing
// the org take, so those do not queue behind a batch.
func (s *DB) lockOrgs(ctx context.Context, tx querier, hs []*store.Host) error {
	if s.dialect != dialectPostgres {
		return nil // SQLite's one connection serialises transactions
	}
	var orgs []int64
	for _, h := range hs {
		if !slices.Contains(orgs, h.OrgID) {
			orgs = append(orgs, h.OrgID)
		}
	}
	slices.Sort(orgs)
	for _, id := range orgs {
		var org int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM orgs WHERE id = ? FOR NO KEY UPDATE`), id).Scan(&org); err != nil {
			return s.classify(err, "")
		}
	}
	return nil
}

// checkPools runs check once over each pool hs join, in the order of
// their first host. The projects' rows are locked first, in id order (so
// that two batches cannot deadlock), as checkPool does for one host.
func (s *DB) checkPools(ctx context.Context, tx querier, hs []*store.Host, check store.PoolJoinCheck) error {
	type poolKey struct {
		org, project int64
		model        string
	}
	var order []poolKey
	joining := map[poolKey][]*store.Host{}
	var projects []int64
	for _, h := range hs {
		k := poolKey{h.OrgID, h.ProjectID, h.ModelName}
		if _, ok := joining[k]; !ok {
			order = append(order, k)
			if !slices.Contains(projects, h.ProjectID) {
				projects = append(projects, h.ProjectID)
			}
		}
		joining[k] = append(joining[k], h)
	}
	slices.Sort(projects)
	for _, id := range projects {
		var pj int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM projects WHERE id = ?`+s.forUpdate()), id).Scan(&pj); err != nil {
			return s.classify(err, "")
		}
	}
	for _, k := range order {
		pool, err := list(ctx, s, tx, s.scanHost,
			`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND project_id = ? AND model_name = ? AND state <> 'retired' ORDER BY id`,
			k.org, k.project, k.model)
		if err != nil {
			return err
		}
		if err := check(pool, joining[k]); err != nil {
			return err
		}
	}
	return nil
}

// checkPool runs check over h's pool. The project row is locked first (on
// PostgreSQL; SQLite serialises transactions), so two writes to one pool
// cannot both pass a check that each would fail against the other.
func (s *DB) checkPool(ctx context.Context, tx querier, h *store.Host, check store.PoolCheck) error {
	if check == nil {
		return nil
	}
	var pj int64
	if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM projects WHERE id = ?`+s.forUpdate()), h.ProjectID).Scan(&pj); err != nil {
		return s.classify(err, "")
	}
	pool, err := list(ctx, s, tx, s.scanHost,
		`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND project_id = ? AND model_name = ? AND state <> 'retired' AND id <> ? ORDER BY id`,
		h.OrgID, h.ProjectID, h.ModelName, h.ID)
	if err != nil {
		return err
	}
	return check(pool)
}

// GetHost implements store.Store.
func (s *DB) GetHost(ctx context.Context, orgID, id int64) (*store.Host, error) {
	h, err := s.scanHost(s.qr.QueryRowContext(ctx, s.q(`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND id = ?`), orgID, id))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &h, nil
}

// ListHosts implements store.Store.
func (s *DB) ListHosts(ctx context.Context, orgID int64, p store.Page) ([]store.Host, error) {
	return list(ctx, s, s.qr, s.scanHost,
		`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?`, orgID, p.After, limitOf(p))
}

// ListHostsByIP implements store.Store.
func (s *DB) ListHostsByIP(ctx context.Context, orgID int64, ip string) ([]store.Host, error) {
	return list(ctx, s, s.qr, s.scanHost,
		`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND ip = ? AND state <> 'retired' ORDER BY id`, orgID, ip)
}

// ListPoolHosts implements store.Store.
func (s *DB) ListPoolHosts(ctx context.Context, orgID, projectID int64, modelName string) ([]store.Host, error) {
	return list(ctx, s, s.qr, s.scanHost,
		`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND project_id = ? AND model_name = ? AND state <> 'retired' ORDER BY id`,
		orgID, projectID, modelName)
}

// ListLiveHosts implements store.Store.
func (s *DB) ListLiveHosts(ctx context.Context) ([]store.Host, error) {
	return list(ctx, s, s.qr, s.scanHost, `SELECT `+hostCols+` FROM hosts WHERE state <> 'retired' ORDER BY id`)
}

// UpdateHost implements store.Store.
func (s *DB) UpdateHost(ctx context.Context, h *store.Host, check store.PoolCheck) error {
	t := now()
	if h.DrainTimeout <= 0 {
		h.DrainTimeout = store.DefaultDrainTimeout
	}
	return s.tx(ctx, func(tx querier) error {
		if err := s.checkPool(ctx, tx, h, check); err != nil {
			return err
		}
		if err := s.exec(ctx, tx, "host address",
			`UPDATE hosts SET port = ?, model_name = ?, recipe = ?, notes = ?, auto_apply = ?, drain_timeout_s = ?, hf_token = ?, updated_at = ?
			 WHERE id = ? AND org_id = ?`,
			h.Port, h.ModelName, jsonText(h.Recipe), h.Notes, h.AutoApply, drainSeconds(h.DrainTimeout), s.sealOptional(h.HFToken), t, h.ID, h.OrgID); err != nil {
			return err
		}
		h.UpdatedAt = t
		return nil
	})
}

// RequestApply implements store.Store.
func (s *DB) RequestApply(ctx context.Context, orgID, id int64) error {
	return s.exec(ctx, s.qr, "", `UPDATE hosts SET apply_requested = TRUE, updated_at = ? WHERE id = ? AND org_id = ? AND state <> 'retired'`, now(), id, orgID)
}

// sealOptional is the storage form of an optional secret: ” when v is
// unset, else v sealed with the master key.
func (s *DB) sealOptional(v secret.Secret) string {
	if v.IsZero() {
		return ""
	}
	return s.sealer.Seal(v)
}

// drainSeconds is d in whole seconds, at least 1.
func drainSeconds(d time.Duration) int64 { return max(int64(d/time.Second), 1) }

// StartDrain implements store.Store.
func (s *DB) StartDrain(ctx context.Context, orgID, id int64, check store.PoolCheck, at time.Time) error {
	ts := at.UTC().Truncate(time.Microsecond)
	return s.tx(ctx, func(tx querier) error {
		h, err := s.scanHost(tx.QueryRowContext(ctx, s.q(`SELECT `+hostCols+` FROM hosts WHERE org_id = ? AND id = ? AND state <> 'retired'`+s.forUpdate()), orgID, id))
		if err != nil {
			return s.classify(err, "")
		}
		if h.Drain != nil { // already draining: the first deadline stands
			return s.exec(ctx, tx, "", `UPDATE hosts SET apply_requested = TRUE, updated_at = ? WHERE id = ?`, now(), id)
		}
		if err := s.checkPool(ctx, tx, &h, check); err != nil {
			return err
		}
		deadline := ts.Add(h.DrainTimeout)
		if h.ProviderID != 0 {
			if err := s.setProviderDrain(ctx, tx, h.ProviderID, &deadline); err != nil {
				return err
			}
		}
		return s.exec(ctx, tx, "",
			`UPDATE hosts SET apply_requested = TRUE, drain_started_at = ?, drain_deadline = ?, drained_at = NULL, updated_at = ? WHERE id = ?`,
			ts, deadline, now(), id)
	})
}

// setProviderDrain writes a fleet provider's DrainDeadline (nil clears it)
// and touches the provider, so every replica's snapshot sees it.
func (s *DB) setProviderDrain(ctx context.Context, tx querier, providerID int64, deadline *time.Time) error {
	settings, err := s.providerSettings(ctx, tx, providerID)
	if err != nil {
		return err
	}
	settings.DrainDeadline = deadline
	_, err = tx.ExecContext(ctx, s.q(`UPDATE providers SET settings = ?, updated_at = ? WHERE id = ?`), jsonText(settings), now(), providerID)
	return s.classify(err, "")
}

// providerSettings reads a provider's settings column, for a change that
// keeps what else is in it.
func (s *DB) providerSettings(ctx context.Context, tx querier, providerID int64) (store.ProviderSettings, error) {
	var raw string
	if err := tx.QueryRowContext(ctx, s.q(`SELECT settings FROM providers WHERE id = ?`), providerID).Scan(&raw); err != nil {
		return store.ProviderSettings{}, s.classify(err, "")
	}
	var settings store.ProviderSettings
	if err := json.Unmarshal([]byte(raw), &settings); err != nil {
		return store.ProviderSettings{}, fmt.Errorf("store: provider %d: settings column: %w", providerID, err)
	}
	return settings, nil
}

// MarkDrained implements store.Store.
func (s *DB) MarkDrained(ctx context.Context, id int64, at time.Time) error {
	_, err := s.qr.ExecContext(ctx, s.q(`UPDATE hosts SET drained_at = ?, updated_at = ? WHERE id = ? AND drain_started_at IS NOT NULL AND drained_at IS NULL`),
		at.UTC().Truncate(time.Microsecond), now(), id)
	return s.classify(err, "")
}

// forUpdate locks the selected rows until the transaction ends, on
// PostgreSQL; SQLite's one connection serialises transactions anyway.
func (s *DB) forUpdate() string {
	if s.dialect == dialectPostgres {
		return " FOR UPDATE"
	}
	return ""
}

// TouchHosts implements store.Store.
func (s *DB) TouchHosts(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	marks := make([]string, len(ids))
	args := []any{at.UTC().Truncate(time.Microsecond)}
	for i, id := range ids {
		marks[i] = "?"
		args = append(args, id)
	}
	_, err := s.qr.ExecContext(ctx, s.q(`UPDATE hosts SET last_config_fetch = ? WHERE id IN (`+strings.Join(marks, ",")+`)`), args...)
	return s.classify(err, "")
}

// fetchChunk bounds the hosts of one RecordConfigFetches statement
// (PostgreSQL takes at most 65,535 parameters).
const fetchChunk = 1000

// RecordConfigFetches implements store.Store (laterTimes).
func (s *DB) RecordConfigFetches(ctx context.Context, fetches []store.ConfigFetch) error {
	rows := make([]hostTime, len(fetches))
	for i, f := range fetches {
		rows[i] = hostTime{f.HostID, f.At}
	}
	return s.laterTimes(ctx, "last_config_fetch", rows)
}

// RecordHeartbeats implements store.Store (laterTimes).
func (s *DB) RecordHeartbeats(ctx context.Context, beats []store.Heartbeat) error {
	rows := make([]hostTime, len(beats))
	for i, b := range beats {
		rows[i] = hostTime{b.HostID, b.At}
	}
	return s.laterTimes(ctx, "reported_at", rows)
}

// hostTime is one host's time for laterTimes.
type hostTime struct {
	id int64
	at time.Time
}

// laterTimes sets column (a timestamp of hosts, named by the caller, never
// by input) of each host to its time where that is later. On PostgreSQL
// each chunk of hosts is one statement; on SQLite one prepared statement
// runs per host, all in one transaction either way. Neither moves a time
// back: two batches may commit out of order (one process still has
// several writers: overlapping flushes, TouchHosts, a report written at
// once after a heartbeat queued).
func (s *DB) laterTimes(ctx context.Context, column string, rows []hostTime) error {
	if len(rows) == 0 {
		return nil
	}
	return s.tx(ctx, func(tx querier) error {
		if s.dialect == dialectPostgres {
			for len(rows) > 0 {
				n := min(len(rows), fetchChunk)
				var b strings.Builder
				args := make([]any, 0, 2*n)
				for i, r := range rows[:n] {
					if i > 0 {
						b.WriteString(", ")
					}
					fmt.Fprintf(&b, "($%d::bigint, $%d::timestamptz)", 2*i+1, 2*i+2)
					args = append(args, r.id, r.at.UTC().Truncate(time.Microsecond))
				}
				if _, err := tx.ExecContext(ctx, `UPDATE hosts AS h SET `+column+` = v.at FROM (VALUES `+b.String()+`) AS v(id, at)
					WHERE h.id = v.id AND (h.`+column+` IS NULL OR h.`+column+` < v.at)`, args...); err != nil {
					return s.classify(err, "")
				}
				rows = rows[n:]
			}
			return nil
		}
		for _, r := range rows {
			at := r.at.UTC().Truncate(time.Microsecond)
			if _, err := tx.ExecContext(ctx, `UPDATE hosts SET `+column+` = ? WHERE id = ?
				AND (`+column+` IS NULL OR `+column+` < ?)`, at, r.id, at); err != nil {
				return s.classify(err, "")
			}
		}
		return nil
	})
}

// RecordHostReports implements store.Store.
func (s *DB) RecordHostReports(ctx context.Context, entries []store.HostReportEntry, at time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	ts := at.UTC().Truncate(time.Microsecond)
	return s.tx(ctx, func(tx querier) error {
		for _, e := range entries {
			var err error
			if e.Current == nil {
				_, err = tx.ExecContext(ctx, s.q(`UPDATE hosts SET applied_revision = ?, report = ?, reported_at = ? WHERE id = ?`),
					e.Applied, jsonText(e.Report), ts, e.HostID)
			} else {
				_, err = tx.ExecContext(ctx, s.q(
					`UPDATE hosts SET applied_revision = ?, report = ?, reported_at = ?, applied_assignment = ?, apply_requested = FALSE WHERE id = ?`),
					e.Applied, jsonText(e.Report), ts, jsonText(e.Current), e.HostID)
			}
			if err != nil {
				return s.classify(err, "")
			}
		}
		return nil
	})
}

// hostProviderSlug is the slug the fleet gives a host's provider: "host-N",
// or "host-N-2", ... when an operator already took it.
func (s *DB) hostProviderSlug(ctx context.Context, tx querier, orgID, hostID int64) (string, error) {
	base := "host-" + strconv.FormatInt(hostID, 10)
	for i := 1; i < 100; i++ {
		slug := base
		if i > 1 {
			slug += "-" + strconv.Itoa(i)
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM slugs WHERE org_id = ? AND slug = ?`), orgID, slug).Scan(&n); err != nil {
			return "", s.classify(err, "")
		}
		if n == 0 {
			return slug, nil
		}
	}
	return "", fmt.Errorf("store: no free provider slug for host %d", hostID)
}

// RegisterHost implements store.Store.
func (s *DB) RegisterHost(ctx context.Context, id int64, reg store.HostRegistration) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		// The row lock orders this against a concurrent retire: whichever
		// commits second sees the other's state.
		h, err := s.scanHost(tx.QueryRowContext(ctx, s.q(`SELECT `+hostCols+` FROM hosts WHERE id = ?`+s.forUpdate()), id))
		if err != nil {
			return s.classify(err, "")
		}
		if h.State == store.HostRetired {
			return errors.New("store: a retired host is never registered")
		}
		port := h.Port
		if reg.Port != 0 {
			port = reg.Port
		}
		baseURL := "http://" + hostPort(h.IP, port) + "/v1"
		models := stringList([]string{reg.ServedModel})
		routeID, err := s.fleetRoute(ctx, tx, h.ProjectID, h.ModelName, t)
		if err != nil {
			return err
		}
		providerID := h.ProviderID
		if providerID == 0 {
			slug, err := s.hostProviderSlug(ctx, tx, h.OrgID, h.ID)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO slugs (org_id, slug, owner_kind) VALUES (?, ?, 'provider')`), h.OrgID, slug); err != nil {
				return s.classify(err, "slug")
			}
			providerID, err = s.insert(ctx, tx, "slug",
				`INSERT INTO providers (org_id, slug, name, kind, base_url, metadata_source, context_limit, models, settings, created_at, updated_at)
				 VALUES (?, ?, ?, 'vllm', ?, 'configured', ?, ?, ?, ?, ?)`,
				h.OrgID, slug, "fleet host "+strconv.FormatInt(h.ID, 10)+" ("+h.IP+")", baseURL,
				reg.ContextLimit, models, jsonText(store.ProviderSettings{PolicyRoute: routeID}), t, t)
			if err != nil {
				return err
			}
		} else {
			// The host inherits its fleet route's policy; settings an
			// operator gave the host's provider stay.
			settings, err := s.providerSettings(ctx, tx, providerID)
			if err != nil {
				return err
			}
			settings.PolicyRoute = routeID
			settings.DrainDeadline = nil // registered again: the drain is over
			if err := s.exec(ctx, tx, "", `UPDATE providers SET deleted_at = NULL, base_url = ?, context_limit = ?, models = ?, settings = ?, updated_at = ? WHERE id = ?`,
				baseURL, reg.ContextLimit, models, jsonText(settings), t, providerID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM provider_keys WHERE provider_id = ?`), providerID); err != nil {
				return s.classify(err, "")
			}
		}
		if err := s.addKey(ctx, tx, &store.ProviderKey{ProviderID: providerID, Secret: h.APIKey, Weight: 1}, t); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM route_targets WHERE route_id = ? AND provider_id = ?`), routeID, providerID).Scan(&n); err != nil {
			return s.classify(err, "")
		}
		if n == 0 {
			var pos int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(position), -1) + 1 FROM route_targets WHERE route_id = ?`), routeID).Scan(&pos); err != nil {
				return s.classify(err, "")
			}
			if _, err := tx.ExecContext(ctx, s.q(
				`INSERT INTO route_targets (route_id, provider_id, upstream_model, weight, position, context_limit) VALUES (?, ?, ?, 1, ?, 0)`),
				routeID, providerID, text(reg.ServedModel), pos); err != nil {
				return s.classify(err, "")
			}
		} else if _, err := tx.ExecContext(ctx, s.q(`UPDATE route_targets SET upstream_model = ? WHERE route_id = ? AND provider_id = ?`),
			text(reg.ServedModel), routeID, providerID); err != nil {
			return s.classify(err, "")
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE routes SET updated_at = ? WHERE id = ?`), t, routeID); err != nil {
			return s.classify(err, "")
		}
		return s.exec(ctx, tx, "", `UPDATE hosts SET state = 'serving', provider_id = ?, drain_started_at = NULL, drain_deadline = NULL, drained_at = NULL, updated_at = ?
			WHERE id = ? AND state <> 'retired'`, providerID, t, id)
	})
}

// fleetRoute returns the id of the project's route model, creating it
// (weighted, no policy) when missing.
func (s *DB) fleetRoute(ctx context.Context, tx querier, projectID int64, model string, t time.Time) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM routes WHERE project_id = ? AND model = ?`), projectID, model).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, s.classify(err, "")
	}
	return s.insert(ctx, tx, "route model",
		`INSERT INTO routes (project_id, model, strategy, policy, created_at, updated_at) VALUES (?, ?, 'weighted', '{}', ?, ?)`,
		projectID, model, t, t)
}

// DeregisterHost implements store.Store.
func (s *DB) DeregisterHost(ctx context.Context, id int64, state string) error {
	if state != store.HostDown && state != store.HostRetired {
		return fmt.Errorf("store: deregister to state %q", state)
	}
	t := now()
	return s.tx(ctx, func(tx querier) error {
		var provider sql.NullInt64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT provider_id FROM hosts WHERE id = ?`+s.forUpdate()), id).Scan(&provider); err != nil {
			return s.classify(err, "")
		}
		if provider.Valid {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM route_targets WHERE provider_id = ?`), provider.Int64); err != nil {
				return s.classify(err, "")
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE providers SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`),
				t, t, provider.Int64); err != nil {
				return s.classify(err, "")
			}
		}
		if state == store.HostRetired {
			return s.exec(ctx, tx, "", `UPDATE hosts SET state = 'retired', retired_at = COALESCE(retired_at, ?), drain_started_at = NULL, drain_deadline = NULL, drained_at = NULL, updated_at = ? WHERE id = ?`, t, t, id)
		}
		return s.exec(ctx, tx, "", `UPDATE hosts SET state = ?, updated_at = ? WHERE id = ? AND state <> 'retired'`, state, t, id)
	})
}

// hostPort joins an IP and a port, bracketing IPv6.
func hostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(port)
	}
	return ip + ":" + strconv.Itoa(port)
}

const fleetKeyCols = `id, org_id, name, lookup, hash, created_at, revoked_at`

func scanFleetKey(sc interface{ Scan(...any) error }) (store.FleetKey, error) {
	var (
		k       store.FleetKey
		hash    string
		revoked sql.NullTime
	)
	if err := sc.Scan(&k.ID, &k.OrgID, &k.Name, &k.Lookup, &hash, &k.CreatedAt, &revoked); err != nil {
		return k, err
	}
	k.CreatedAt, k.RevokedAt = k.CreatedAt.UTC(), nullTime(revoked)
	var err error
	if k.Hash, err = secret.ParseHash(hash); err != nil {
		return k, fmt.Errorf("store: fleet key %d: %w", k.ID, err)
	}
	return k, nil
}

// CreateFleetKey implements store.Store.
func (s *DB) CreateFleetKey(ctx context.Context, k *store.FleetKey, maxActive int) error {
	t := now()
	return s.tx(ctx, func(tx querier) error {
		// Locking the org row serialises concurrent creates on PostgreSQL,
		// so the count stays true until the insert.
		var org int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM orgs WHERE id = ?`+s.forUpdate()), k.OrgID).Scan(&org); err != nil {
			return s.classify(err, "")
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM fleet_keys WHERE org_id = ? AND revoked_at IS NULL`), k.OrgID).Scan(&n); err != nil {
			return s.classify(err, "")
		}
		if n >= maxActive {
			return &store.ConflictError{What: "active fleet keys"}
		}
		id, err := s.insert(ctx, tx, "fleet key",
			`INSERT INTO fleet_keys (org_id, name, lookup, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			k.OrgID, k.Name, k.Lookup, k.Hash.Hex(), t)
		if err != nil {
			return err
		}
		k.ID, k.CreatedAt = id, t
		return nil
	})
}

// ListFleetKeys implements store.Store.
func (s *DB) ListFleetKeys(ctx context.Context, orgID int64, p store.Page) ([]store.FleetKey, error) {
	return list(ctx, s, s.qr, scanFleetKey,
		`SELECT `+fleetKeyCols+` FROM fleet_keys WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?`, orgID, p.After, limitOf(p))
}

// FleetKeyByLookup implements store.Store.
func (s *DB) FleetKeyByLookup(ctx context.Context, lookup string) (*store.FleetKey, error) {
	k, err := scanFleetKey(s.qr.QueryRowContext(ctx,
		s.q(`SELECT `+fleetKeyCols+` FROM fleet_keys WHERE lookup = ? AND revoked_at IS NULL`), lookup))
	if err != nil {
		return nil, s.classify(err, "")
	}
	return &k, nil
}

// RevokeFleetKey implements store.Store. Revoking twice keeps the first
// time.
func (s *DB) RevokeFleetKey(ctx context.Context, orgID, id int64, at time.Time) error {
	return s.exec(ctx, s.qr, "", `UPDATE fleet_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND org_id = ?`,
		at.UTC().Truncate(time.Microsecond), id, orgID)
}
