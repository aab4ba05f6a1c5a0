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

// NotifyChange tells the other replicas sharing the store that the routing
// state changed. The payload is "schema|instance", so replicas of another
// rolter in the same database, and this store itself, ignore it. On SQLite
// (one process) it does nothing.
func (s *DB) NotifyChange(ctx context.Context) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	_, err := s.qr.ExecContext(ctx, `SELECT pg_notify($1, current_schema() || '|' || $2)`, changeChannel, s.instance)
	return s.classify(err, "")
}

// ListenChanges calls fn after another replica announces a change, until
// ctx ends. Announcements that arrive together are coalesced into one call.
// fn is also called each time LISTEN is (re-)established, because
// announcements made before were missed; a lost connection is re-established
// with backoff. On SQLite it returns at once.
func (s *DB) ListenChanges(ctx context.Context, fn func(), log *slog.Logger) {
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
func (s *DB) listen(ctx context.Context, fn func()) error {
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
		fn()
		mine := func(payload string) bool {
			sch, inst, _ := strings.Cut(payload, "|")
			return sch == schema && inst != s.instance
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			if !mine(n.Payload) {
				continue
			}
			// Coalesce a burst (a YAML import, a sweep registering many
			// hosts) into one rebuild.
			for {
				wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				_, err := pc.WaitForNotification(wait)
				cancel()
				if err == nil {
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
			fn()
		}
	})
}
