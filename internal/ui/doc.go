// Package ui is rolter's web console at /ui/ (issue 16): server-rendered
// html/template pages from embedded files, made quicker by htmx (vendored
// in static/, no build step). Every read and write goes through the admin
// domain service (*admin.Service), with the session's admin scope on the
// context, exactly as the admin API's handlers do; the UI never touches
// the store.
//
// # Security
//
// Log in with an admin token (POST /ui/login), checked against the routing
// snapshot like the admin API's bearer token. A session is a random id in
// an HttpOnly, SameSite=Strict cookie (Secure under TLS); the server keeps
// a bounded in-memory table (sessions.go: least recently used evicted,
// 12 h idle expiry on an injected clock) holding the token, which is
// re-checked on every request so revoking it logs its sessions out.
// Every POST needs the session's CSRF token (a hidden "csrf" field, or the
// X-CSRF-Token header that hx-headers on <body> adds to htmx requests);
// without it the answer is 403 and nothing changes. Every response carries
// a CSP without inline script or style (security.go), so templates never
// contain <script> bodies, style= attributes or on*= handlers: behaviour
// lives in static/app.js, driven by data-* attributes.
//
// # Adding a page
//
// The left navigation is the list nav in pages.go; every entry is there
// from the start, and one with no page yet renders templates/coming.html.
// To build the page "routes", add two files and touch nothing shared.
//
// First, routes.go, with an init that mounts its handlers:
//
//	func init() {
//		mount("routes", func(u *UI) {
//			u.get("/routes", u.routeList)         // needs a session
//			u.post("/routes/_new", u.routeCreate) // needs a session and the CSRF token
//		})
//	}
//
// A handler is func(w http.ResponseWriter, r *request) error. It starts
// with v, err := u.newView(r, "routes", withProject), which resolves ?org=
// (and ?project=) against what the token may see; calls the Service with
// r.Context() (it carries the scope); sets v.Data; and ends with u.render(w,
// status, v, "") (or a fragment's name, for an htmx swap). A returned
// error becomes an error page with the admin error's code and message;
// form handlers instead put asFormErr(err) on their data and render the
// form again with what was typed (status 422). A successful POST ends with
// seeOther (post/redirect/get).
//
// Second, templates/routes.html, defining "content" (and any fragments the
// page swaps alone). It is parsed into its own set with layout.html and
// partials.html, so its names cannot collide with another page's.
// partials.html has the shared pieces: page-head, form-error, field-error,
// text-field, status, copy, pager, confirm (a destructive action behind a
// dialog naming the consequence) and secret-once (a new secret, shown once
// with a copy button, removed from the page when its dialog closes).
//
// Collection actions take a path segment starting with '_' ("/_new"),
// which no slug can, so they never shadow an item's page. Links are built
// with the template function link ("routes", "org", .Org, ...), which
// drops empty values. Nothing else is shared between pages, so two pages
// built at once do not conflict.
//
// # Testing a page
//
// harness_test.go builds the UI over a real SQLite store and the real
// Service behind httptest (newHarness; h.svc to set data up, h.token a
// global admin token, h.clock the sessions' manual clock). A browser
// (h.browser()) is a cookie-keeping HTTP client: login, get, postCSRF.
// browser_test.go drives chromium through chromedp with one browser per
// test binary: newTab(t, h) opens a fresh browser context, tb.login,
// tb.do (chromedp actions), tb.waitFor (a JavaScript condition; never a
// sleep), tb.text, tb.screenshot (into t.TempDir(), path logged), and
// tb.clean at the end (fails on a dialog, an exception or a CSP
// violation). Put a page's tests in routes_test.go.
package ui
