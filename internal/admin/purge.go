package admin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// CodeSlugInAllowlist refuses a purge while virtual keys' allowlists name
// the slug; the error's keys list them.
const CodeSlugInAllowlist = "slug_in_allowlist"

// maxListedKeys bounds the keys a purge refusal lists (and names in its
// message): the first ones by id, and how many more.
const (
	maxListedKeys   = 100
	maxKeysInPhrase = 5
)

// AllowlistKey is a virtual key whose allowlist names a slug, as a purge
// refusal lists it: id, name and project, never its secret.
type AllowlistKey struct {
	ID      int64    `json:"id"`
	Name    string   `json:"name"`
	Project string   `json:"project"`
	Entries []string `json:"entries"`
}

// fromPurge maps a delete's or purge's store error: a refusal by the
// allowlist rule (design 000 §3) is ErrConflict naming the keys, anything
// else as fromStore.
func fromPurge(err error, kind, slug string) error {
	var al *store.AllowlistError
	if !errors.As(err, &al) {
		return fromStore(err, kind+" "+quote(slug))
	}
	e := &Error{Kind: ErrConflict, Code: CodeSlugInAllowlist, Err: err}
	var names []string
	for i, k := range al.Keys {
		if i < maxListedKeys {
			e.Keys = append(e.Keys, AllowlistKey{ID: k.KeyID, Name: k.Name, Project: k.Project, Entries: k.Entries})
		}
		if i < maxKeysInPhrase {
			names = append(names, fmt.Sprintf("%d %s (project %s)", k.KeyID, quote(k.Name), quote(k.Project)))
		}
	}
	list := strings.Join(names, ", ")
	if more := len(al.Keys) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	e.Message = fmt.Sprintf("%s %s is named in the allowlists of %d virtual keys: %s; purging frees the slug, and whatever claims it next would be allowed to them. "+
		"Remove those entries, or purge with force: true to remove them in the same step (a key left with no entry is revoked)",
		kind, quote(slug), len(al.Keys), list)
	return e
}

// logAllowlistEdits logs what a forced purge did to keys' allowlists.
func (s *Service) logAllowlistEdits(org, kind, slug string, refs []store.AllowlistRef) {
	for _, k := range refs {
		s.log.Info("purge removed allowlist entries naming the slug", "org", org, kind, slug,
			"virtual_key", k.KeyID, "key_name", k.Name, "project", k.Project, "entries", k.Entries, "revoked", k.Revoked)
	}
}
