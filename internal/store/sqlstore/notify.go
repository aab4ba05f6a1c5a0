package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// changeChannel is the PostgreSQL NOTIFY channel on which replicas announce
// committed configuration changes (SPEC §1: a change made through any
// replica reaches all of them within a second).
const changeChannel = "rolter_changes"

// newInstance names one opened store, to tell its own announcements from
// other replicas' (two replicas may even share a process, as in tests).
func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Change is what an announcement says changed.
type Change int

const (
	// ChangeConfig: the routing state (what a snapshot holds) changed;
	// the replicas rebuild their snapshots, and all that follows them.
	ChangeConfig Change = iota
	// ChangeFleet: only fleet hosts or fleet keys changed, which no
	// snapshot holds; the replicas' fleet endpoints reload.
	ChangeFleet
)

// fleetSuffix ends the payload of a ChangeFleet announcement. A replica
// that does not know it takes the announcement for a ChangeConfig (the
// instance does not match its own): it does more than needed, never less.
const fleetSuffix = "|fleet"

// NotifyChange tells the other replicas sharing the store that the routing
// state changed. The payload is "schema|instance", so replicas of another
// rolter in the same database, and this store itself, ignore it. On SQLite
// (one process) it does nothing.
func (s *DB) NotifyChange(ctx context.Context) error {
	return s.notify(ctx, "")
}

// NotifyFleetChange tells the other replicas that only fleet hosts or
// fleet keys changed (ChangeFleet): the payload is
// "schema|instance|fleet". On SQLite it does nothing.
func (s *DB) NotifyFleetChange(ctx context.Context) error {
	return s.notify(ctx, fleetSuffix)
}

func (s *DB) notify(ctx context.Context, suffix string) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	_, err := s.qr.ExecContext(ctx, `SELECT pg_notify($1, current_schema() || '|' || $2)`, changeChannel, s.instance+suffix)
	return s.classify(err, "")
}

// ListenChanges calls fn after another replica announces a change, until
// ctx ends, with what changed. Announcements that arrive together are
// coalesced into one call, a ChangeConfig if any of them is one. fn is
// also called (ChangeConfig) each time LISTEN is (re-)established, because
// announcements made before were missed; a lost connection is
// re-established with backoff. On SQLite it returns at once.
func (s *DB) ListenChanges(ctx context.Context, fn func(Change), log *slog.Logger) {
	if s.dialect != dialectPostgres {
		return
	}
	backoff := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		err := s.listen(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute { // it was listening: start the backoff over
			backoff = time.Second
		}
		log.Warn("config change listener lost its connection; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// listen holds one connection in LISTEN until it fails or ctx ends.
func (s *DB) listen(ctx context.Context, fn func(Change)) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	// The connection may still be listening when this returns: it never
	// goes back into the pool, where a query would find it with
	// notifications queued. Listeners end only with ctx or a broken
	// connection, so this costs a session per reconnect, not per query.
	defer discard(conn)
	var schema string
	if err := conn.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+changeChannel); err != nil {
			return err
		}
		// Announcements made before LISTEN took effect (at start-up, or
		// while the connection was lost) were missed: rebuild once.
		fn(ChangeConfig)
		// mine: an announcement of this schema by another store, and what
		// it says changed.
		mine := func(payload string) (bool, Change) {
			sch, inst, _ := strings.Cut(payload, "|")
			c := ChangeConfig
			if i, ok := strings.CutSuffix(inst, fleetSuffix); ok {
				inst, c = i, ChangeFleet
			}
			return sch == schema && inst != s.instance, c
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			ok, change := mine(n.Payload)
			if !ok {
				continue
			}
			// Coalesce a burst (a YAML import, a sweep registering many
			// hosts) into one rebuild.
			for {
				wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				n, err := pc.WaitForNotification(wait)
				cancel()
				if err == nil {
					if ok, c := mine(n.Payload); ok && c == ChangeConfig {
						change = ChangeConfig
					}
					continue // another one: keep draining
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if pc.IsClosed() {
					return err
				}
				break // quiet for 50ms (a timeout leaves the connection usable)
			}
			fn(change)
		}
	})
}
