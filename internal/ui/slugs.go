package ui

import (
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

// The slug pre-check (design 000): the provider and group forms ask, as the
// operator types, whether a slug is free, and on a conflict offer the next
// free one. Providers and groups share one slug namespace per org, so both
// use this one endpoint: GET /ui/slug-check?org=&slug=&name=&current=.
func init() {
	mountShared(func(u *UI) { u.get("/slug-check", u.slugCheck) })
}

// slugCheck is the data of the "slug-check" partial.
type slugCheck struct {
	// Slug is what was checked; Derived marks one derived from the name
	// because the slug field is empty.
	Slug    string
	Derived bool
	// State is "available", "taken", "reserved" (by a deleted provider
	// or group until it is purged; Reason says which, e.g. "reserved
	// (deleted group)"), "current", "invalid" or "" (nothing to check
	// yet).
	State, Reason string
	Suggestion    string
	// Message and Code explain an invalid slug.
	Message, Code string
	// Target is the id of the slug input a suggestion fills.
	Target string
}

func (u *UI) slugCheck(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "", false)
	if err != nil {
		return err
	}
	out := slugCheck{Slug: strings.TrimSpace(r.FormValue("slug")), Target: "slug"}
	if out.Slug == "" {
		if name := strings.TrimSpace(r.FormValue("name")); name != "" {
			out.Slug, out.Derived = admin.DeriveSlug(name), true
			if out.Slug == "" {
				out.State, out.Message, out.Code = "invalid", "the name has no ASCII letter or digit to derive a slug from: enter one", admin.CodeValidation
			}
		}
	}
	switch {
	case out.Slug == "" || out.State != "":
	case out.Slug == r.FormValue("current"):
		out.State = "current"
	default:
		check, err := u.svc.CheckSlug(r.Context(), v.Org, out.Slug)
		if fe, ok := asFormErr(err); ok {
			out.State, out.Message, out.Code = "invalid", fieldError(fe, "slug"), fe.Code
			if out.Message == "" {
				out.Message = fe.Message
			}
			break
		} else if err != nil {
			return err
		}
		out.State, out.Suggestion = "available", ""
		if !check.Available {
			out.State, out.Reason, out.Suggestion = check.State, check.Reason, check.Suggestion
		}
	}
	u.renderPartial(w, "slug-check", out)
	return nil
}
