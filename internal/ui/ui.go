package ui

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
)

// Prefix is where the UI is mounted.
const Prefix = "/ui"

// Options configure the UI; the zero value is the production setting.
type Options struct {
	// Clock times session idle expiry (default clock.System).
	Clock clock.Clock
	// MaxSessions bounds the session table (default DefaultMaxSessions).
	MaxSessions int
	// IdleTimeout logs a session out after this long unused (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// SecureCookie marks the session cookie Secure on every response, for
	// a deployment behind a TLS proxy that does not send
	// X-Forwarded-Proto (--ui-secure-cookie).
	SecureCookie bool
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
}

// UI serves the web console under Prefix.
type UI struct {
	svc      *admin.Service
	log      *slog.Logger
	sessions *sessions
	tmpl     *templates
	static   *staticFiles
	mux      *http.ServeMux
	opts     Options
}

// New builds the UI over the admin domain service: every read and write
// goes through svc, exactly as the admin API's do.
func New(svc *admin.Service, log *slog.Logger, opts Options) *UI {
	opts.defaults()
	static := mustLoadStatic()
	u := &UI{svc: svc, log: log, sessions: newSessions(opts.Clock, opts.MaxSessions, opts.IdleTimeout),
		tmpl: mustParseTemplates(static), static: static, mux: http.NewServeMux(), opts: opts}
	u.mux.HandleFunc("GET "+Prefix+"/{$}", u.home)
	u.mux.HandleFunc("GET "+Prefix+"/static/{file}", u.static.serve)
	u.mux.HandleFunc("GET "+Prefix+"/login", u.loginForm)
	u.mux.HandleFunc("POST "+Prefix+"/login", u.login)
	u.post("/logout", u.logout)
	for _, fn := range sharedMounts {
		fn(u)
	}
	for _, p := range nav {
		if mount := mounts[p.Name]; mount != nil {
			mount(u)
		} else {
			u.get("/"+p.Name, u.coming(p))
		}
	}
	return u
}

// ServeHTTP marks every response with the security headers, then
// dispatches.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if _, pattern := u.mux.Handler(r); pattern == "" {
		u.renderError(w, r, nil, http.StatusNotFound, "not_found", "there is no page at "+r.URL.Path)
		return
	}
	u.mux.ServeHTTP(w, r)
}

// request is a logged-in request as page handlers see it.
// Its Context carries the token's admin scope: the Service confines an
// org-scoped token to its org.
type request struct {
	*http.Request
	sess *session
}

// handler is a page endpoint. An error it returns is shown as an error
// page (see fail); form handlers show their own errors on the form.
type handler func(w http.ResponseWriter, r *request) error

// get registers a page read: it needs a session.
func (u *UI) get(path string, h handler) {
	u.mux.HandleFunc("GET "+Prefix+path, u.authed(h, false))
}

// post registers a state change: it needs a session and its CSRF token,
// checked before the handler runs, so a refused request changes nothing.
func (u *UI) post(path string, h handler) {
	u.mux.HandleFunc("POST "+Prefix+path, u.authed(h, true))
}

func (u *UI) authed(h handler, write bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ss, ok := u.session(w, r)
		if !ok {
			u.toLogin(w, r)
			return
		}
		if write && (!sameOrigin(r) || !csrfOK(w, r, ss)) {
			u.renderError(w, r, ss, http.StatusForbidden, "csrf_refused",
				"this form was refused: it did not carry the page's CSRF token (reload the page and try again); nothing was changed")
			return
		}
		// The scope rides on the request's context, so every Service call
		// made with r.Context() is confined to what the token may see.
		rq := &request{Request: r.WithContext(admin.WithScope(r.Context(), ss.scope)), sess: ss}
		if err := h(w, rq); err != nil {
			u.fail(w, rq, err)
		}
	}
}

// session returns the request's live session. The token is re-checked
// against the current snapshot on every request, so revoking or expiring
// it logs the session out; such a session is removed and its cookie
// cleared.
func (u *UI) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return nil, false
	}
	ss, ok := u.sessions.get(c.Value)
	if !ok {
		http.SetCookie(w, u.sessionCookie(r, ""))
		return nil, false
	}
	scope, ok := u.svc.Authorize(ss.token.Reveal())
	if !ok || scope != ss.scope {
		u.sessions.remove(ss)
		http.SetCookie(w, u.sessionCookie(r, ""))
		return nil, false
	}
	return ss, true
}

// toLogin sends a request without a session to the login page, which
// returns to where it was going.
func (u *UI) toLogin(w http.ResponseWriter, r *http.Request) {
	next := ""
	if r.Method == http.MethodGet {
		next = r.URL.RequestURI()
	}
	to := Prefix + "/login"
	if next != "" {
		to += "?" + url.Values{"next": {next}}.Encode()
	}
	if r.Header.Get("HX-Request") == "true" {
		// htmx would swap the login page into a fragment; reload instead.
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// home is /ui/: the Models page, the landing page of design 000.
func (u *UI) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, Prefix+"/"+nav[0].Name, http.StatusSeeOther)
}

// safeNext accepts only a path inside the UI as where a login returns to,
// so the login form cannot be made to redirect elsewhere.
func safeNext(next string) string {
	for _, c := range []byte(next) {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return Prefix + "/"
		}
	}
	p, query, _ := strings.Cut(next, "?")
	clean := path.Clean(p)
	if !strings.HasPrefix(clean, Prefix+"/") && clean != Prefix {
		return Prefix + "/"
	}
	if query != "" {
		clean += "?" + query
	}
	return clean
}

// loginForm shows the login page, or goes on to the UI when logged in.
func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if _, ok := u.session(w, r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther) //nolint:gosec // G710: safeNext keeps it inside /ui/
		return
	}
	u.renderLogin(w, r, http.StatusOK, "")
}

// login checks an admin token exactly as the admin API does (against the
// snapshot) and starts a session holding its scope. A wrong token is a 401
// that says nothing about why.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		u.renderLogin(w, r, http.StatusForbidden, "this login was refused: it came from another site")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		u.renderLogin(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	tok := secret.New(strings.TrimSpace(r.PostForm.Get("token")))
	scope, ok := u.svc.Authorize(tok.Reveal())
	if tok.IsZero() || !ok {
		u.renderLogin(w, r, http.StatusUnauthorized, "that is not a valid admin token")
		return
	}
	_, id := u.sessions.create(tok, scope)
	http.SetCookie(w, u.sessionCookie(r, id))
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther) //nolint:gosec // G710: safeNext keeps it inside /ui/
}

// logout ends the session and clears its cookie.
func (u *UI) logout(w http.ResponseWriter, r *request) error {
	u.sessions.remove(r.sess)
	http.SetCookie(w, u.sessionCookie(r.Request, ""))
	http.Redirect(w, r.Request, Prefix+"/login", http.StatusSeeOther)
	return nil
}

// fail shows a handler's error as an error page: the admin error's code
// and message for a domain error, a bare "internal error" (and a log line)
// for anything else.
func (u *UI) fail(w http.ResponseWriter, r *request, err error) {
	var ae *admin.Error
	if !errors.As(err, &ae) {
		ae = &admin.Error{Code: admin.CodeInternal, Message: "internal error", Err: err}
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(ae, admin.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(ae, admin.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(ae, admin.ErrConflict):
		status = http.StatusConflict
	case errors.Is(ae, admin.ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	if status >= 500 {
		u.log.Error("ui request failed", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	}
	u.renderError(w, r.Request, r.sess, status, ae.Code, ae.Message)
}

// scope of a session, for tests and the top bar.
func (s *session) scopeLabel() string {
	if s.scope.Global() {
		return "global token"
	}
	return "org token · " + s.scope.Org
}

// loginPage is the data of login.html.
type loginPage struct {
	Next  string
	Error string
}

func (u *UI) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	next := r.FormValue("next")
	if next != "" {
		next = safeNext(next)
	}
	u.render(w, status, &view{Page: "login", Title: "Log in", Data: loginPage{Next: next, Error: msg}}, "")
}
