package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/rolter/rolter/internal/store"
)

// inOrg finds the org by name, then what (a "provider", "group" or
// "project") by key within it, with ErrNotFound naming both when either
// is missing.
func inOrg[T any](ctx context.Context, s *Service, org, what, key string,
	get func(context.Context, int64, string) (*T, error)) (*store.Org, *T, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return nil, nil, err
	}
	v, err := get(ctx, o.ID, key)
	if err != nil {
		return nil, nil, fromStore(err, what+" "+quote(key)+" in org "+quote(org))
	}
	return o, v, nil
}

// liveProviderBySlug is the provider of the org a route target or a group
// member names: nil, and no error, when there is none or it is
// soft-deleted.
func (s *Service) liveProviderBySlug(ctx context.Context, orgID int64, slug string) (*store.Provider, error) {
	pv, err := s.st.GetProvider(ctx, orgID, slug)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fromStore(err, "provider")
	case pv.DeletedAt != nil:
		return nil, nil
	}
	return pv, nil
}

// nameAndSlug completes a new provider's or group's name and slug: either
// one may be left out, the name defaulting to the slug and the slug
// derived from the name (DeriveSlug).
func nameAndSlug(fe fieldErrors, name, slug *string) {
	if *name == "" && *slug != "" {
		*name = *slug
	}
	if *slug == "" {
		if *slug = DeriveSlug(*name); *slug == "" && *name != "" {
			fe.add("slug", "is required: the name has no ASCII letter or digit to derive one from")
		}
	}
}

// changeSlug applies a PATCH's slug to *slug. Changing it changes every
// "slug/model" address, so it needs allow, and it returns the warning the
// answer carries.
func changeSlug(slug, to *string, allow bool) ([]string, error) {
	if to == nil || *to == *slug {
		return nil, nil
	}
	if !allow {
		return nil, &Error{Kind: ErrInvalid, Code: CodeSlugImmutable,
			Message: "slugs are immutable because callers address models as slug/model; repeat with ?allow_slug_change=true to change it anyway",
			Fields:  map[string]string{"slug": "immutable"}}
	}
	w := fmt.Sprintf("slug changed from %q to %q: addresses %q/<model> no longer resolve; callers must use %q/<model>",
		*slug, *to, *slug, *to)
	*slug = *to
	return []string{w}, nil
}
