package ui

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

// Session defaults.
const (
	// DefaultMaxSessions bounds the session table: the least recently used
	// session is dropped (logged out) when a login would exceed it, so a
	// flood of logins cannot grow the process without bound.
	DefaultMaxSessions = 10_000
	// MaxSessionsPerToken bounds the sessions of one admin token: its
	// oldest is dropped when a login would exceed it, so one token's
	// logins cannot push every other operator out of the table.
	MaxSessionsPerToken = 20
	// DefaultIdleTimeout logs a session out after this long without a
	// request (issue 16: 12 h idle).
	DefaultIdleTimeout = 12 * time.Hour
	// CookieName is the session cookie.
	CookieName = "rolter_ui"
)

// session is one logged-in browser. The token is kept so every request can
// be re-checked against the current snapshot: a revoked or expired admin
// token logs its sessions out at their next request.
type session struct {
	key      [sha256.Size]byte // the table's key: the hash of the cookie value
	csrf     string
	token    secret.Secret
	scope    snapshot.AdminScope
	lastSeen time.Time
}

// sessions is the bounded, in-memory session table, in least recently used
// order. It is per process: a restart, or another replica, does not know a
// session, and its browser logs in again.
type sessions struct {
	clock clock.Clock
	idle  time.Duration
	max   int

	mu  sync.Mutex
	lru *list.List // of *session, most recently used first
	by  map[[sha256.Size]byte]*list.Element
}

func newSessions(c clock.Clock, max int, idle time.Duration) *sessions {
	return &sessions{clock: c, idle: idle, max: max, lru: list.New(), by: map[[sha256.Size]byte]*list.Element{}}
}

// randomID is 32 random bytes, URL-safe: unguessable session ids and CSRF
// tokens.
func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for an authorized token and returns it with the
// cookie value that names it. Only the value's hash is kept, so the table
// holds nothing a reader of memory could replay as a cookie.
func (s *sessions) create(tok secret.Secret, scope snapshot.AdminScope) (*session, string) {
	id := randomID()
	ss := &session{key: sha256.Sum256([]byte(id)), csrf: randomID(), token: tok, scope: scope, lastSeen: s.clock.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The token's own least recently used sessions go first: a login never
	// evicts another token's session while this token holds its share.
	n := 0
	for e := s.lru.Front(); e != nil; {
		next := e.Next()
		if old := e.Value.(*session); old.scope.TokenID == scope.TokenID {
			if n++; n >= MaxSessionsPerToken {
				s.lru.Remove(e)
				delete(s.by, old.key)
			}
		}
		e = next
	}
	s.by[ss.key] = s.lru.PushFront(ss)
	for s.lru.Len() > s.max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.by, old.Value.(*session).key)
	}
	return ss, id
}

// get returns the live session the cookie value names and marks it used;
// an idle-expired one is removed and not returned.
func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	key := sha256.Sum256([]byte(id))
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.by[key]
	if !ok {
		return nil, false
	}
	ss := e.Value.(*session)
	if !now.Before(ss.lastSeen.Add(s.idle)) {
		s.lru.Remove(e)
		delete(s.by, key)
		return nil, false
	}
	ss.lastSeen = now
	s.lru.MoveToFront(e)
	return ss, true
}

// remove ends a session (log out, or its token no longer authorizes).
func (s *sessions) remove(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.by[ss.key]; ok {
		s.lru.Remove(e)
		delete(s.by, ss.key)
	}
}

// len is the number of sessions held, expired ones not yet seen included.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// sessionCookie is the cookie that carries a session id; an empty value
// with MaxAge -1 clears it. Secure is set under TLS: when rolter
// terminates it, when the proxy in front says so (X-Forwarded-Proto:
// https; a client that sends it itself only makes its own cookie
// stricter), and always with Options.SecureCookie (--ui-secure-cookie).
// A plain-HTTP deployment (localhost, a trusted network) still works.
func (u *UI) sessionCookie(r *http.Request, value string) *http.Cookie {
	secure := u.opts.SecureCookie || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	c := &http.Cookie{Name: CookieName, Value: value, Path: Prefix + "/", HttpOnly: true, //nolint:gosec // G124: Secure under TLS only, so plain HTTP on localhost works
		SameSite: http.SameSiteStrictMode, Secure: secure}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}
