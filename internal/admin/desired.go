package admin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// Desired is a declarative state: the orgs it names, each with the
// providers, groups, projects (with their routes and virtual keys) and
// fleet hosts it should hold. Its JSON is the config file format of `rolter
// apply` and `--config` (docs/cli.md) with the secrets resolved: the body of
// POST /admin/v1/apply and the answer of GET /admin/v1/export. The entries
// are the create inputs of the API, so an applied entry passes exactly the
// checks a create or a patch of it would.
type Desired struct {
	Orgs []DesiredOrg `json:"orgs"`
}

// DesiredOrg is an org with everything of it a config file manages.
type DesiredOrg struct {
	OrgInput
	Providers []DesiredProvider `json:"providers,omitempty"`
	// Groups name providers of the org by slug.
	Groups   []DesiredGroup   `json:"groups,omitempty"`
	Projects []DesiredProject `json:"projects,omitempty"`
	// Hosts are fleet assignments; each names its project.
	Hosts []HostInput `json:"hosts,omitempty"`
}

// DesiredProvider is a provider with its key pool. A key is known by its
// secret; Ref names the variable it came from (see Apply).
type DesiredProvider struct {
	ProviderInput
	SlugChange
}

// DesiredGroup is a provider group.
type DesiredGroup struct {
	GroupInput
	SlugChange
}

// SlugChange lets an entry take an existing provider or group to a new
// slug, which changes every "slug/model" address: never done without
// AllowSlugChange. PreviousSlug names the one to rename; without it, an
// existing entry of the same name whose slug differs is the one.
type SlugChange struct {
	PreviousSlug    string `json:"previous_slug,omitempty"`
	AllowSlugChange bool   `json:"allow_slug_change,omitempty"`
}

// DesiredProject is a project with its routes and virtual keys. A virtual
// key is known by its name among the project's live keys; its secret is
// minted on creation and answered once.
type DesiredProject struct {
	ProjectInput
	Routes []RouteInput      `json:"routes,omitempty"`
	Keys   []VirtualKeyInput `json:"keys,omitempty"`
}

// The patches below write an entry's whole desired state over the
// existing one: a field the entry leaves out is reset to what a create
// without it gives, because the file is the truth.

func orgPatch(in OrgInput) OrgPatch {
	return OrgPatch{Description: &in.Description}
}

func projectPatch(in ProjectInput) ProjectPatch {
	return ProjectPatch{Description: &in.Description, Budget: nullable[BudgetInput]{Set: true, Value: in.Budget},
		RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit}
}

// providerPatch is in over an existing provider, with name and slug as
// nameAndSlug completed them.
func providerPatch(in ProviderInput, name, slug string) ProviderPatch {
	ms := in.MetadataSource
	if ms == "" {
		ms = store.MetadataConfigured
	}
	models, headers := in.Models, in.ForwardHeaders
	return ProviderPatch{Name: &name, Slug: &slug, Kind: &in.Kind, BaseURL: &in.BaseURL, MetadataSource: &ms,
		ContextLimit: &in.ContextLimit, Models: &models, FirstByteTimeout: &in.FirstByteTimeout, IdleTimeout: &in.IdleTimeout,
		ForwardHeaders: &headers, Policy: &in.Policy, Prices: nullable[PricesInput]{Set: true, Value: in.Prices}}
}

// groupPatch is in over an existing group; kept are members the fleet's
// (hosts' providers), which the file does not name.
func groupPatch(in GroupInput, name, slug string, kept []GroupMemberInput) GroupPatch {
	members := append(append([]GroupMemberInput{}, in.Members...), kept...)
	return GroupPatch{Slug: &slug, Name: &name, Strategy: &in.Strategy, Members: &members, Policy: &in.Policy}
}

// routePatch is in over an existing route; kept are targets the fleet
// added (hosts' providers), which no file names.
func routePatch(in RouteInput, kept []TargetInput) RoutePatch {
	targets := append(append([]TargetInput{}, in.Targets...), kept...)
	fallbacks := in.Fallbacks
	if fallbacks == nil {
		fallbacks = []string{}
	}
	return RoutePatch{Strategy: &in.Strategy, Targets: &targets, Policy: &in.Policy, RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit,
		Fallbacks: &fallbacks, ContextFallback: &in.ContextFallback}
}

// keyPatch is in over the existing key k. An unchanged expiry is left out
// of the patch: a live key may have expired, and only a new expiry must lie
// in the future.
func keyPatch(in VirtualKeyInput, k *store.VirtualKey) VirtualKeyPatch {
	models := in.Models
	if models == nil {
		models = []string{}
	}
	p := VirtualKeyPatch{Name: &in.Name, Models: &models, RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit,
		Budget: nullable[BudgetInput]{Set: true, Value: in.Budget}}
	switch {
	case sameTime(in.ExpiresAt, k.ExpiresAt):
	case in.ExpiresAt == nil:
		p.ExpiresAt = json.RawMessage("null")
	default:
		p.ExpiresAt, _ = json.Marshal(in.ExpiresAt)
	}
	return p
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// MaxApplyEntries bounds the entries of a desired state, of all kinds
// together (Desired.Entries): an apply's work, and the time it holds the
// store's transaction, grow with them. It takes a catalog of 10,000
// routes over 1,000 providers with up to three targets a route (issue 21:
// 27,002 entries with one or two, 42,002 with three); such a file,
// decoded, is tens of MiB, and its creates are batched (routeBatch).
const MaxApplyEntries = 50_000

// Entries counts d's entries: orgs, providers and their pool keys, groups
// and their members, projects, routes and their targets, virtual keys and
// hosts.
func (d Desired) Entries() int {
	n := len(d.Orgs)
	for _, o := range d.Orgs {
		n += len(o.Providers) + len(o.Groups) + len(o.Projects) + len(o.Hosts)
		for _, p := range o.Providers {
			n += len(p.Keys)
		}
		for _, g := range o.Groups {
			n += len(g.Members)
		}
		for _, p := range o.Projects {
			n += len(p.Routes) + len(p.Keys)
			for _, r := range p.Routes {
				n += len(r.Targets)
			}
		}
	}
	return n
}

// checkSize refuses a desired state of more than MaxApplyEntries entries.
func checkSize(d Desired) error {
	if n := d.Entries(); n > MaxApplyEntries {
		return tooManyEntries(strconv.Itoa(n))
	}
	return nil
}

// tooManyEntries is the refusal of a desired state with n entries.
func tooManyEntries(n string) error {
	return &Error{Kind: ErrInvalid, Code: CodeTooManyEntries,
		Message: fmt.Sprintf("the desired state has %s entries, more than the %d one apply takes (orgs, providers and their keys, groups and their members, projects, routes and their targets, virtual keys and hosts, together): split it into several applies, an org at a time", n, MaxApplyEntries)}
}

// checkDesired refuses a desired state that names one entry twice: which
// of the two would win is no rule anyone should rely on.
func checkDesired(d Desired) error {
	orgs := map[string]string{}
	for oi, o := range d.Orgs {
		where := fmt.Sprintf("orgs[%d]", oi)
		if err := repeats(orgs, o.Name, where, KindOrg, o.Name, "name"); err != nil {
			return err
		}
		if err := checkOrgSlugs(o, where); err != nil {
			return err
		}
		projects, hosts := map[string]string{}, map[string]string{}
		for i, p := range o.Projects {
			pw := fmt.Sprintf("%s.projects[%d]", where, i)
			if err := repeats(projects, p.Name, pw, KindProject, o.Name+"/"+p.Name, "name"); err != nil {
				return err
			}
			routes, keys := map[string]string{}, map[string]string{}
			for ri, r := range p.Routes {
				if err := repeats(routes, r.Model, fmt.Sprintf("%s.routes[%d]", pw, ri), KindRoute, o.Name+"/"+p.Name+"/"+r.Model, "model"); err != nil {
					return err
				}
			}
			for ki, k := range p.Keys {
				if err := repeats(keys, k.Name, fmt.Sprintf("%s.keys[%d]", pw, ki), KindVirtualKey, o.Name+"/"+p.Name+"/"+k.Name, "name"); err != nil {
					return err
				}
			}
		}
		for i, h := range o.Hosts {
			name := hostName(o.Name, h.IP, h.Port)
			if err := repeats(hosts, name, fmt.Sprintf("%s.hosts[%d]", where, i), KindHost, name, "ip"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSlugs refuses a desired state in which two provider or group
// entries of an org name one slug explicitly: an explicit slug is an
// address the operator picked, never suffixed (design 000), so one of the
// two would silently be another's. Entries that name no slug are given
// distinct ones by the backfill.
func checkSlugs(d Desired) error {
	for oi, o := range d.Orgs {
		if err := checkOrgSlugs(o, fmt.Sprintf("orgs[%d]", oi)); err != nil {
			return err
		}
	}
	return nil
}

func checkOrgSlugs(o DesiredOrg, where string) error {
	slugs := map[string]string{}
	for i, p := range o.Providers {
		if err := repeats(slugs, p.Slug, fmt.Sprintf("%s.providers[%d]", where, i), KindProvider, o.Name+"/"+p.Slug, "slug"); err != nil {
			return err
		}
	}
	for i, g := range o.Groups {
		if err := repeats(slugs, g.Slug, fmt.Sprintf("%s.groups[%d]", where, i), KindGroup, o.Name+"/"+g.Slug, "slug"); err != nil {
			return err
		}
	}
	return nil
}

// repeats records key at where in seen, or fails naming the entry that
// had it first. An empty key is the Service's to refuse.
func repeats(seen map[string]string, key, where, kind, name, field string) error {
	if key == "" {
		return nil
	}
	if first, ok := seen[key]; ok {
		return &ApplyError{Entry: where, Kind: kind, Name: name,
			Err: Invalid(map[string]string{field: "repeats " + first + "; each entry may appear once"})}
	}
	seen[key] = where
	return nil
}
