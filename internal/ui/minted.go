package ui

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Secrets the server mints (virtual keys, fleet keys, host keys, admin
// tokens) are shown exactly once: in the answer to the POST that minted
// them, inside the secret-once dialog (partials.html), which removes itself
// from the page when closed. No redirect follows that POST and nothing
// keeps the secret on the server, so no later request, reload or history
// entry can show it again.
//
// The mint forms post through htmx (hx-post, hx-target="#content"): the
// answer is the page's content with the dialog, and HX-Replace-Url points
// the address bar at the page's plain GET address, so reloading (or coming
// back to) the page fetches it without the secret. Without JavaScript the
// form posts normally and the answer is the whole page.

// minted is a secret to show once, with what it is.
type minted struct {
	Title  string
	Secret string
	Note   string
}

// renderMinted answers a successful mint with v (which carries the
// secret): the whole page, or for htmx its content, with the address bar
// set to the page's GET address at.
func (u *UI) renderMinted(w http.ResponseWriter, r *request, v *view, at string) {
	u.renderForm(w, r, http.StatusOK, v, at)
}

// renderForm answers a form post that did not redirect: a form shown
// again with its errors (422), or a minted secret (200). For htmx it is
// the page's content (app.js lets a 422 swap), with the address bar set to
// at when at is not "".
func (u *UI) renderForm(w http.ResponseWriter, r *request, status int, v *view, at string) {
	if isHTMX(r) {
		if at != "" {
			w.Header().Set("HX-Replace-Url", at)
		}
		u.render(w, status, v, "content")
		return
	}
	u.render(w, status, v, "")
}

// listFormAgain is finish's again for a form posted with or without htmx
// (see renderForm) that has a list field, a textarea of one item a line:
// the form once more with its error at *at (422), the errors of single
// items folded onto field. lineOf maps each item to its line.
func (u *UI) listFormAgain(w http.ResponseWriter, r *request, v *view, at **formErr, field string, lineOf []int) func(*formErr) error {
	return func(e *formErr) error {
		foldIndexed(e, field, lineOfIndex(lineOf))
		*at = e
		u.renderForm(w, r, http.StatusUnprocessableEntity, v, "")
		return nil
	}
}

// foldIndexed moves the errors of a list's items ("models[2]") onto the
// list's own field ("models"), which is the one textarea the form has,
// naming the line each came from. line maps an item's index to its line
// in the textarea (1-based).
func foldIndexed(e *formErr, field string, line func(i int) int) {
	if e == nil || len(e.Fields) == 0 {
		return
	}
	type item struct {
		i   int
		msg string
	}
	var items []item
	for k, msg := range e.Fields {
		rest, ok := strings.CutPrefix(k, field+"[")
		if !ok || !strings.HasSuffix(rest, "]") {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if err != nil {
			continue
		}
		items = append(items, item{i, msg})
		delete(e.Fields, k)
	}
	if len(items) == 0 {
		return
	}
	sort.Slice(items, func(a, b int) bool { return items[a].i < items[b].i })
	var parts []string
	if msg := e.Fields[field]; msg != "" {
		parts = append(parts, msg)
	}
	for _, it := range items {
		parts = append(parts, fmt.Sprintf("line %d: %s", line(it.i), it.msg))
	}
	e.Fields[field] = strings.Join(parts, "; ")
}

// listLines splits a textarea into one entry per non-blank line, trimmed,
// and remembers each entry's line number (for foldIndexed). Unlike lines,
// a comma is part of an entry: a vLLM argument may hold one.
func listLines(s string) (items []string, lineOf []int) {
	for n, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			items = append(items, l)
			lineOf = append(lineOf, n+1)
		}
	}
	return items, lineOf
}

// lineOfIndex returns foldIndexed's line function for lineOf.
func lineOfIndex(lineOf []int) func(int) int {
	return func(i int) int {
		if i >= 0 && i < len(lineOf) {
			return lineOf[i]
		}
		return i + 1
	}
}

// short is a revision or hash as the UI shows it: its first 8 characters
// and an ellipsis (the whole value goes in a title).
func short(rev string) string {
	if len(rev) <= 8 {
		return rev
	}
	return rev[:8] + "…"
}
