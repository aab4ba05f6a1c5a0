package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// GroupInput creates a provider group (design 000, addendum): one address,
// "group-slug/model", for a set of providers of the org.
type GroupInput struct {
	Slug     string             `json:"slug,omitempty"`
	Name     string             `json:"name,omitempty"`
	Strategy string             `json:"strategy,omitempty"`
	Members  []GroupMemberInput `json:"members"`
	// Policy governs every group-slug/model request, combined with the
	// serving member's own policy.
	Policy store.Policy `json:"policy"`
}

// GroupMemberInput is one provider of a group, named by slug. ModelMap
// rewrites the model a client asks for before it is sent to this member;
// models not in it pass through unchanged.
type GroupMemberInput struct {
	Provider string            `json:"provider"`
	Weight   *int              `json:"weight,omitempty"`
	ModelMap map[string]string `json:"model_map,omitempty"`
}

// GroupPatch changes a group; absent fields stay, and Members, when
// present, replaces them all.
type GroupPatch struct {
	Slug     *string             `json:"slug"`
	Name     *string             `json:"name"`
	Strategy *string             `json:"strategy"`
	Members  *[]GroupMemberInput `json:"members"`
	Policy   *store.Policy       `json:"policy"`
}

// GroupView is a group as the API shows it.
type GroupView struct {
	Slug      string            `json:"slug"`
	Name      string            `json:"name"`
	Strategy  string            `json:"strategy"`
	Members   []GroupMemberView `json:"members"`
	Policy    store.Policy      `json:"policy"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// DeletedAt is set on a soft-deleted group: out of routing, its slug
	// reserved until it is purged.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	Warnings  []string   `json:"warnings,omitempty"`
}

// GroupMemberView is a member as the API shows it. A soft-deleted provider
// stays listed: the group keeps it, routing skips it.
type GroupMemberView struct {
	Provider string            `json:"provider"`
	Weight   int               `json:"weight"`
	ModelMap map[string]string `json:"model_map"`
}

func groupView(g store.Group) GroupView {
	v := GroupView{Slug: g.Slug, Name: g.Name, Strategy: g.Strategy, Members: []GroupMemberView{}, Policy: g.Policy,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, DeletedAt: g.DeletedAt}
	for _, m := range g.Members {
		mm := m.ModelMap
		if mm == nil {
			mm = map[string]string{}
		}
		v.Members = append(v.Members, GroupMemberView{Provider: m.ProviderSlug, Weight: m.Weight, ModelMap: mm})
	}
	return v
}

// checkGroup validates what a create and a patch share, except members.
func checkGroup(fe fieldErrors, g *store.Group) {
	if strings.TrimSpace(g.Name) == "" || len(g.Name) > 200 {
		fe.add("name", "is required (1-200 characters)")
	}
	if !slugPattern.MatchString(g.Slug) {
		fe.add("slug", slugRule)
	}
	if g.Strategy == "" {
		g.Strategy = "weighted"
	}
	if !contains(strategies, g.Strategy) {
		fe.add("strategy", "must be one of %s", strings.Join(strategies, ", "))
	}
	checkPolicy(fe, g.Policy)
}

// resolveMembers validates members and resolves their provider slugs in
// the org. Only live providers may join; a slug that names a group is
// refused because groups do not nest (design 000, addendum).
func (s *Service) resolveMembers(ctx context.Context, orgID int64, fe fieldErrors, in []GroupMemberInput) ([]store.GroupMember, error) {
	if len(in) == 0 {
		fe.add("members", "needs at least one member")
	}
	if len(in) > MaxTargets {
		fe.add("members", "holds %d members; at most %d", len(in), MaxTargets)
		return nil, fe.err()
	}
	var (
		out     []store.GroupMember
		unknown []string
		nested  bool
		seen    = map[string]int{}
	)
	for i, m := range in {
		field := fmt.Sprintf("members[%d]", i)
		w := checkWeight(fe, field+".weight", m.Weight)
		if len(m.ModelMap) > MaxListItems {
			fe.add(field+".model_map", "holds %d entries; at most %d", len(m.ModelMap), MaxListItems)
		}
		for _, from := range slices.Sorted(maps.Keys(m.ModelMap)) { // sorted: the same mistake reads the same
			checkModelName(fe, field+".model_map", from)
			checkModelName(fe, field+".model_map", m.ModelMap[from])
		}
		if m.Provider == "" {
			fe.add(field+".provider", "is required")
			continue
		}
		if j, dup := seen[m.Provider]; dup {
			fe.add(field+".provider", "repeats members[%d].provider; list each provider once", j)
			continue
		}
		seen[m.Provider] = i
		pv, err := s.liveProviderBySlug(ctx, orgID, m.Provider)
		if err != nil {
			return nil, err
		}
		if pv != nil {
			out = append(out, store.GroupMember{ProviderID: pv.ID, ProviderSlug: pv.Slug, Weight: w, ModelMap: m.ModelMap})
			continue
		}
		switch _, err := s.st.GetGroup(ctx, orgID, m.Provider); {
		case err == nil:
			fe.add(field+".provider", "names a group; groups cannot contain groups")
			nested = true
		case errors.Is(err, store.ErrNotFound):
			unknown = append(unknown, field+".provider")
		default:
			return nil, fromStore(err, "group")
		}
	}
	if err := fe.err(); err != nil {
		if ae, ok := err.(*Error); ok && nested {
			ae.Message = "groups cannot contain groups; see fields"
		}
		return nil, err
	}
	if len(unknown) > 0 {
		e := &Error{Kind: ErrInvalid, Code: CodeUnknownProvider,
			Message: "a member names a provider that does not exist (or is deleted) in this org", Fields: map[string]string{}}
		for _, f := range unknown {
			e.Fields[f] = "no such provider"
		}
		return nil, e
	}
	return out, nil
}

// CreateGroup creates a provider group. A missing slug is derived from the
// name and a missing name defaults to the slug, as for providers; a taken
// slug (by a provider or a group) is ErrConflict with a suggestion.
func (s *Service) CreateGroup(ctx context.Context, org string, in GroupInput) (GroupView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return GroupView{}, err
	}
	fe := fieldErrors{}
	g := &store.Group{OrgID: o.ID, Slug: in.Slug, Name: in.Name, Strategy: in.Strategy, Policy: in.Policy}
	nameAndSlug(fe, &g.Name, &g.Slug)
	checkGroup(fe, g)
	if g.Members, err = s.resolveMembers(ctx, o.ID, fe, in.Members); err != nil {
		return GroupView{}, err
	}
	if err := s.committed(ctx, s.fromSlugWrite(ctx, o.ID, g.Slug, s.st.CreateGroup(ctx, g), "group")); err != nil {
		return GroupView{}, err
	}
	return groupView(*g), nil
}

// group finds a group by slug, soft-deleted included.
func (s *Service) group(ctx context.Context, org, slug string) (*store.Org, *store.Group, error) {
	return inOrg(ctx, s, org, "group", slug, s.st.GetGroup)
}

// liveGroup is group, but a soft-deleted one is not found for writes.
func (s *Service) liveGroup(ctx context.Context, org, slug string) (*store.Org, *store.Group, error) {
	o, g, err := s.group(ctx, org, slug)
	if err == nil && g.DeletedAt != nil {
		err = notFound("group %s is deleted; its slug stays reserved until it is purged (DELETE ?purge=true)", quote(slug))
	}
	return o, g, err
}

// UpdateGroup applies a patch. As for providers, changing the slug changes
// every "slug/model" address, so it needs allowSlugChange and the answer
// carries a warning. Without members in the patch the stored ones stay as
// they are, soft-deleted providers included.
func (s *Service) UpdateGroup(ctx context.Context, org, slug string, in GroupPatch, allowSlugChange bool) (GroupView, error) {
	o, g, err := s.liveGroup(ctx, org, slug)
	if err != nil {
		return GroupView{}, err
	}
	if in.Name != nil {
		g.Name = *in.Name
	}
	if in.Strategy != nil {
		g.Strategy = *in.Strategy
	}
	if in.Policy != nil {
		g.Policy = *in.Policy
	}
	warnings, err := changeSlug(&g.Slug, in.Slug, allowSlugChange)
	if err != nil {
		return GroupView{}, err
	}
	fe := fieldErrors{}
	checkGroup(fe, g)
	if in.Members != nil {
		if g.Members, err = s.resolveMembers(ctx, o.ID, fe, *in.Members); err != nil {
			return GroupView{}, err
		}
	} else if err := fe.err(); err != nil {
		return GroupView{}, err
	}
	if err := s.committed(ctx, s.fromSlugWrite(ctx, o.ID, g.Slug, s.st.UpdateGroup(ctx, g), "group")); err != nil {
		return GroupView{}, err
	}
	v := groupView(*g)
	v.Warnings = warnings
	return v, nil
}

// DeleteGroup soft-deletes a group, as DeleteProvider does a provider
// (design 000 §3): it leaves routing and its slug stays reserved, so that
// a key allowed "slug/*" is never silently re-pointed at whatever claims
// the slug next. With purge it removes the group and frees the slug,
// unless a key's allowlist names the slug (ErrConflict,
// CodeSlugInAllowlist, listing the keys); force purges anyway and removes
// those entries in the same transaction.
func (s *Service) DeleteGroup(ctx context.Context, org, slug string, purge, force bool) error {
	_, g, err := s.group(ctx, org, slug)
	if err != nil {
		return err
	}
	switch {
	case purge:
		var refs []store.AllowlistRef
		refs, err = s.st.PurgeGroup(ctx, g.ID, force)
		s.logAllowlistEdits(org, "group", g.Slug, refs)
	case g.DeletedAt != nil:
		err = notFound("group %s is already deleted; purge it with ?purge=true to free the slug", quote(g.Slug))
	default:
		err = s.st.SoftDeleteGroup(ctx, g.ID, s.now())
	}
	return s.committed(ctx, fromPurge(err, "group", g.Slug))
}
