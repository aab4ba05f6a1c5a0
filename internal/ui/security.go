package ui

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// contentSecurityPolicy allows only the UI's own files: no inline script
// or style, no eval, no framing, forms posting only back to the UI. Every
// template therefore keeps script and style in static/ (no <script> body,
// no style= attribute, no on*= handler), and htmx is configured not to
// inject its indicator styles (layout.html).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// setSecurityHeaders marks every UI response, static files and errors
// included.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
}

// csrfField and csrfHeader carry a session's CSRF token on a state-changing
// request: the hidden field of a form, the header of an htmx request (set
// for every htmx request by hx-headers on <body>).
const (
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// maxFormBytes bounds a UI form body; the largest forms are a provider's
// few dozen fields.
const maxFormBytes = 1 << 20

// csrfOK reports whether a state-changing request carries its session's
// CSRF token. The form is parsed from a bounded body. The comparison is in
// constant time.
// Whichever way the token comes, the body is read here, bounded, and only
// as a urlencoded form: a multipart body (which net/http would spool to
// temporary files) is refused.
func csrfOK(w http.ResponseWriter, r *http.Request, ss *session) bool {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(strings.ToLower(ct), "multipart/") {
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return false
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostForm.Get(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// sameOrigin refuses a cross-site POST when the browser says where it comes
// from: a defence beside the CSRF token and the SameSite cookie, and the
// only one the login form has (no session yet). Sec-Fetch-Site is the
// browser's own verdict. Origin is compared only when it names one: under
// our Referrer-Policy no-referrer, browsers send "Origin: null" even for a
// same-origin form. A request without either (an old browser, a script) is
// judged by the CSRF token alone.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
