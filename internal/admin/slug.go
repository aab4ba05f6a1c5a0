package admin

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// slugPattern is the provider/group slug rule of design 000.
var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

const (
	// SlugMax is the longest slug.
	SlugMax  = 63
	slugRule = "must match ^[a-z0-9][a-z0-9-]{0,62}$"
)

// DeriveSlug turns a display name into a slug: lowercase, every run of
// characters outside [a-z0-9] becomes one '-', '-' trimmed at both ends,
// truncated to 63 (and trimmed again, so it never ends in '-'). It returns
// "" when the name has no ASCII letter or digit.
func DeriveSlug(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
			continue
		}
		dash = true
	}
	return cutSlug(b.String(), SlugMax)
}

// cutSlug cuts s to n bytes (slugs are ASCII) without leaving a trailing
// '-'.
func cutSlug(s string, n int) string {
	if len(s) > n {
		s = strings.TrimRight(s[:n], "-")
	}
	return s
}

// SuffixedSlug is "base-n", the base cut to at most baseMax characters and
// so that the result fits in SlugMax, with no '-' left at the cut. The API
// suggests it with baseMax SlugMax; the import's backfill (design 000) cuts
// every suffixed base to 58.
func SuffixedSlug(base string, n, baseMax int) string {
	suffix := "-" + strconv.Itoa(n)
	return cutSlug(base, min(baseMax, SlugMax-len(suffix))) + suffix
}

// suggestSlug returns the first free "<base>-N" for N = 2, 3, ..., with the
// base shortened so the result stays within 63 characters.
func (s *Service) suggestSlug(ctx context.Context, orgID int64, base string) (string, error) {
	for n := 2; ; n++ {
		cand := SuffixedSlug(base, n, SlugMax)
		taken, err := s.st.SlugTaken(ctx, orgID, cand)
		if err != nil {
			return "", fromStore(err, "slug")
		}
		if !taken {
			return cand, nil
		}
	}
}

// slugTaken is the ErrConflict for a claimed slug, with the next free
// suggestion.
func (s *Service) slugTaken(ctx context.Context, orgID int64, slug string) error {
	sug, err := s.suggestSlug(ctx, orgID, slug)
	if err != nil {
		return err
	}
	state, why, err := s.slugState(ctx, orgID, slug)
	if err != nil {
		return err
	}
	msg := "slug " + quote(slug) + " is taken in this org (providers and groups share one namespace)"
	if state == SlugReserved {
		msg = "slug " + quote(slug) + " is " + why + " in this org: a deleted provider or group keeps its slug until it is purged, so that no address is silently re-pointed"
	}
	field := "taken"
	if state == SlugReserved {
		field = why
	}
	return &Error{Kind: ErrConflict, Code: CodeSlugTaken, Message: msg, Suggestion: sug, Fields: map[string]string{"slug": field}}
}

// States of a slug (SlugCheck.State).
const (
	SlugAvailable = "available"
	SlugTaken     = "taken"
	// SlugReserved: held by a soft-deleted provider or group until it is
	// purged (design 000 §3).
	SlugReserved = "reserved"
)

// SlugCheck is the answer of GET /orgs/{org}/slugs/{slug}.
type SlugCheck struct {
	Slug      string `json:"slug"`
	Available bool   `json:"available"`
	// State is available, taken (by a live provider or group) or
	// reserved (by a deleted one, until it is purged); Reason says which,
	// e.g. "reserved (deleted group)".
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
	Suggestion string `json:"suggestion,omitempty"`
}

// slugState says who holds slug: SlugAvailable, or SlugTaken or
// SlugReserved with the reason, "taken (provider)" or "reserved (deleted
// group)".
func (s *Service) slugState(ctx context.Context, orgID int64, slug string) (state, reason string, err error) {
	h, err := s.st.SlugHolder(ctx, orgID, slug)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return SlugAvailable, "", nil
	case err != nil:
		return "", "", fromStore(err, "slug")
	case h.Deleted:
		return SlugReserved, "reserved (deleted " + h.Kind + ")", nil
	}
	return SlugTaken, "taken (" + h.Kind + ")", nil
}

// fromSlugWrite maps the error of a write that claims a slug: a taken slug
// is slugTaken's ErrConflict, anything else as fromStore.
func (s *Service) fromSlugWrite(ctx context.Context, orgID int64, slug string, err error, what string) error {
	var ce *store.ConflictError
	if errors.As(err, &ce) && ce.What == "slug" {
		return s.slugTaken(ctx, orgID, slug)
	}
	return fromStore(err, what)
}
