package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Apply: declarative configuration (rolter apply, POST /admin/v1/apply,
// and serve --config and rolter import of a rolter file).
//
// Every entry of a Desired is matched to what exists, then created, or
// written over the existing one in full (a patch of every field), each
// through the Service method the API calls for it, so validation is the
// API's and only the API's. Whether an existing entry changed is read from
// the Service's own views before and after the write (diffViews): the
// write runs in a savepoint that is rolled back when the views agree, so
// an unchanged entry is not written at all, not even its updated_at.
//
// The whole apply is one store transaction: on any failure nothing
// changes, and the error (*ApplyError) names the entry. A dry run is the
// same transaction, rolled back at the end, so it checks everything a
// real apply would. The snapshot is rebuilt and announced once, after the
// commit.
//
// Matching. Orgs and projects are known by name, routes by model,
// virtual keys by name among the project's live keys, hosts by address
// (ip and port) among the org's live hosts. Providers and groups are known
// by slug (the one given, or the one derived from the name); an entry
// takes an existing one to a new slug only with allow_slug_change, when it
// names it in previous_slug or when the existing one has the entry's name.
// Pool keys are known by their secret: the server holds them, so a key of
// the file is the pool key with the same secret (compared in constant
// time), whose weight and ref are then brought in line; keys of the file
// the pool lacks are added, and pool keys the file lacks are removed. A dry
// run may lack secrets (unset variables): such a key is taken to be the
// pool key recorded with its ref, and when none is, the pool is not
// compared (a note says so).
//
// Fleet. Providers the fleet registered for hosts (host-N) and the
// targets they serve in routes are the fleet's: never matched, written
// over, exported or pruned; a route an entry writes keeps its fleet
// targets. Routes that fleet hosts serve are never pruned.
//
// Prune deletes what the orgs the desired state names hold and it does
// not: live virtual keys are revoked, routes and groups deleted, hosts
// retired, providers soft-deleted (their slugs stay reserved), and a
// project is deleted with its routes and keys (revoked keys purged).
// Orgs the desired state does not name are never read.

// Actions of a Change.
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionUnchanged = "unchanged"
	ActionDelete    = "delete"
)

// Kinds of entry a Change names.
const (
	KindOrg        = "org"
	KindProject    = "project"
	KindProvider   = "provider"
	KindGroup      = "group"
	KindRoute      = "route"
	KindVirtualKey = "virtual_key"
	KindHost       = "host"
)

// ApplyOptions say how Apply treats the desired state.
type ApplyOptions struct {
	// DryRun runs the whole apply and rolls it back: the plan, checked.
	DryRun bool
	// Prune deletes what the named orgs hold and the desired state does
	// not.
	Prune bool
	// CreateOnly creates what is missing and leaves every existing entry
	// as it is, unread and unwritten (serve --config, rolter import). It
	// is not atomic: each create commits on its own, as those commands
	// always did, so a failure keeps what was created before it and a
	// re-run skips it. It goes with neither DryRun nor Prune.
	CreateOnly bool
}

// ApplyResult is the plan of an apply: one Change per entry of the desired
// state, in its order, then the deletes of a prune.
type ApplyResult struct {
	DryRun  bool     `json:"dry_run"`
	Changes []Change `json:"changes"`
}

// Count is the number of changes with action.
func (r ApplyResult) Count(action string) int {
	n := 0
	for _, c := range r.Changes {
		if c.Action == action {
			n++
		}
	}
	return n
}

// Changed reports whether anything was (or, in a dry run, would be)
// written.
func (r ApplyResult) Changed() bool { return r.Count(ActionUnchanged) != len(r.Changes) }

// Change is what Apply did, or would do, to one entry.
type Change struct {
	Action string `json:"action"`
	Kind   string `json:"kind"`
	// Name is the entry's address: "acme", "acme/openai-prod" (provider or
	// group), "acme/web" (project), "acme/web/gpt-4o" (route),
	// "acme/web/frontend" (virtual key), "acme/10.0.0.5:8000" (host).
	Name string `json:"name"`
	// Entry is the entry's path in the desired state ("orgs[0].providers[1]");
	// none for a delete.
	Entry string `json:"entry,omitempty"`
	// Fields are the changes of an update.
	Fields []FieldChange `json:"fields,omitempty"`
	Notes  []string      `json:"notes,omitempty"`
	// Secret is a created virtual key's secret or host's API key: this
	// answer is the only place it ever appears. Never set in a dry run.
	Secret string `json:"secret,omitempty"`
}

// ApplyError is the failure of one entry of an apply. Nothing of the apply
// was committed (but see ApplyOptions.CreateOnly). AsError shows it as the
// entry's error: the message and the fields are prefixed with its path.
type ApplyError struct {
	Entry      string // path in the desired state; "" for a prune's delete
	Kind, Name string
	Err        error
}

func (e *ApplyError) Error() string { return e.where() + ": " + e.Err.Error() }

func (e *ApplyError) Unwrap() error { return e.Err }

func (e *ApplyError) where() string {
	if e.Entry == "" {
		return fmt.Sprintf("deleting %s %s", e.Kind, quote(e.Name))
	}
	return fmt.Sprintf("%s (%s %s)", e.Entry, e.Kind, quote(e.Name))
}

// shaped is the error as the API answers it.
func (e *ApplyError) shaped() *Error {
	inner := AsError(e.Err)
	out := *inner
	out.Message = e.where() + ": " + inner.Message
	if len(inner.Fields) > 0 && e.Entry != "" {
		out.Fields = make(map[string]string, len(inner.Fields))
		for f, msg := range inner.Fields {
			out.Fields[e.Entry+"."+f] = msg
		}
	}
	return &out
}

var (
	errDryRun    = errors.New("admin: dry run, roll back")
	errUnchanged = errors.New("admin: entry unchanged, roll back")
)

// dryRunSecret stands in, inside a dry run's rolled-back transaction, for
// a key secret the caller did not give, so that the rest of its entry is
// still checked.
var dryRunSecret = secret.New("rolter-dry-run-placeholder")

// Apply brings the store to d; see the comment above for the rules.
func (s *Service) Apply(ctx context.Context, d Desired, opt ApplyOptions) (ApplyResult, error) {
	res := ApplyResult{DryRun: opt.DryRun, Changes: []Change{}}
	if opt.CreateOnly {
		if opt.DryRun || opt.Prune {
			return res, errors.New("admin: a create-only apply is neither a dry run nor a prune")
		}
		// Each write commits (and announces itself) on its own; res keeps
		// what was created before a failure, secrets included.
		err := (&applier{s: s, opt: opt, res: &res}).run(ctx, d)
		return res, err
	}
	err := s.st.Tx(ctx, func(st store.Store) error {
		in := s.inStore(st)
		if opt.DryRun {
			// What the Service logs of its writes (a host added, retired)
			// did not happen.
			in.log = slog.New(slog.DiscardHandler)
		}
		if err := (&applier{s: in, opt: opt, res: &res}).run(ctx, d); err != nil {
			return err
		}
		if opt.DryRun {
			return errDryRun
		}
		return nil
	})
	switch {
	case errors.Is(err, errDryRun):
		return res, nil
	case err != nil:
		var ae *ApplyError
		if !errors.As(err, &ae) {
			err = fromStore(err, "the apply's transaction")
		}
		return ApplyResult{}, err
	}
	if res.Changed() {
		s.changed(ctx)
	}
	return res, nil
}

// applier is one run of Apply.
type applier struct {
	// s writes: inside the apply's transaction, or committing each write
	// (CreateOnly).
	s   *Service
	opt ApplyOptions
	res *ApplyResult
	ix  *stateIndex
}

func (a *applier) run(ctx context.Context, d Desired) error {
	if !a.opt.CreateOnly {
		if err := checkDesired(d); err != nil {
			return err
		}
	}
	state, err := a.s.st.Load(ctx)
	if err != nil {
		return fromStore(err, "state")
	}
	a.ix = newStateIndex(state)
	for i := range d.Orgs {
		if err := a.org(ctx, fmt.Sprintf("orgs[%d]", i), &d.Orgs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) add(c Change) { a.res.Changes = append(a.res.Changes, c) }

func (a *applier) fail(c Change, err error) error {
	return &ApplyError{Entry: c.Entry, Kind: c.Kind, Name: c.Name, Err: err}
}

// create runs fn, which creates c's entry and returns the secret to show
// once, if any.
func (a *applier) create(c Change, fn func() (string, error)) error {
	sec, err := fn()
	switch {
	case err != nil && a.opt.CreateOnly && AlreadyExists(err):
		c.Action, c.Notes = ActionUnchanged, []string{"exists; left as it is"}
	case err != nil:
		return a.fail(c, err)
	default:
		c.Action = ActionCreate
		if !a.opt.DryRun {
			c.Secret = sec
		}
	}
	a.add(c)
	return nil
}

// update runs fn, which writes c's entry over the existing one and returns
// what differs, in a savepoint that is rolled back when nothing does. A
// create-only apply leaves the entry alone.
func (a *applier) update(ctx context.Context, c Change, fn func(s *Service, c *Change) ([]FieldChange, error)) error {
	if a.opt.CreateOnly {
		c.Action, c.Notes = ActionUnchanged, []string{"exists; left as it is"}
		a.add(c)
		return nil
	}
	err := a.s.st.Tx(ctx, func(st store.Store) error {
		fields, err := fn(a.s.inStore(st), &c)
		if err != nil {
			return err
		}
		if len(fields) == 0 {
			return errUnchanged
		}
		c.Fields = fields
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		c.Action = ActionUnchanged
	case err != nil:
		return a.fail(c, err)
	default:
		c.Action = ActionUpdate
	}
	a.add(c)
	return nil
}

// remove runs fn, a delete of a prune.
func (a *applier) remove(c Change, fn func() error) error {
	if err := fn(); err != nil {
		return a.fail(c, err)
	}
	c.Action = ActionDelete
	a.add(c)
	return nil
}

// orgRun is what the apply knows of one org of the desired state.
type orgRun struct {
	name, where string
	// id is the existing org's; 0 when this apply creates it, so that
	// nothing of it exists yet.
	id    int64
	hosts []store.Host // every host, retired ones included
	// fleet are the providers the fleet registered for hosts.
	fleet map[int64]bool
	// keep are the slugs of the providers that stay after a prune: the
	// file's and the fleet's.
	keep map[string]bool
	// named are the slugs the file's providers and groups name, as slug
	// or previous_slug: no other entry takes them by name.
	named map[string]bool
	// claimed are the existing providers and groups matched so far, by
	// id.
	claimedProviders, claimedGroups map[int64]bool
}

func (a *applier) org(ctx context.Context, where string, do *DesiredOrg) error {
	c := Change{Kind: KindOrg, Name: do.Name, Entry: where}
	if err := CheckOrgScope(ctx, do.Name); err != nil {
		return a.fail(c, err)
	}
	o := &orgRun{name: do.Name, where: where, fleet: map[int64]bool{}, keep: map[string]bool{}, named: map[string]bool{},
		claimedProviders: map[int64]bool{}, claimedGroups: map[int64]bool{}}
	if cur := a.ix.orgs[do.Name]; cur == nil {
		if err := a.create(c, func() (string, error) { _, err := a.s.CreateOrg(ctx, do.OrgInput); return "", err }); err != nil {
			return err
		}
	} else {
		if err := checkOrgID(ctx, cur); err != nil {
			return a.fail(c, err)
		}
		o.id = cur.ID
		before := orgView(*cur)
		if err := a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
			v, err := s.PatchOrg(ctx, do.Name, orgPatch(do.OrgInput))
			return diffViews(before, v, only("description")), err
		}); err != nil {
			return err
		}
		hosts, err := allHosts(ctx, a.s.st, o.id)
		if err != nil {
			return a.fail(c, err)
		}
		o.hosts = hosts
		for _, h := range o.hosts {
			if h.ProviderID != 0 {
				o.fleet[h.ProviderID] = true
				o.keep[h.ProviderSlug] = true
			}
		}
	}
	for _, p := range do.Providers {
		name, slug := p.Name, p.Slug
		nameAndSlug(fieldErrors{}, &name, &slug)
		o.keep[slug], o.named[slug], o.named[p.PreviousSlug] = true, true, true
	}
	for _, g := range do.Groups {
		name, slug := g.Name, g.Slug
		nameAndSlug(fieldErrors{}, &name, &slug)
		o.named[slug], o.named[g.PreviousSlug] = true, true
	}
	for i := range do.Providers {
		if err := a.provider(ctx, o, i, &do.Providers[i]); err != nil {
			return err
		}
	}
	for i := range do.Groups {
		if err := a.group(ctx, o, i, &do.Groups[i]); err != nil {
			return err
		}
	}
	for i := range do.Projects {
		if err := a.project(ctx, o, i, &do.Projects[i]); err != nil {
			return err
		}
	}
	for i := range do.Hosts {
		if err := a.host(ctx, o, i, &do.Hosts[i]); err != nil {
			return err
		}
	}
	if a.opt.Prune && o.id != 0 {
		return a.prune(ctx, o, do)
	}
	return nil
}

// matchSlug finds the existing provider or group (T) an entry is: the one
// with the entry's slug, else the one its previous_slug names, else the one
// unclaimed entry of the same name that no other entry names. A match
// under another slug is a slug change: refused without allow_slug_change.
// A create-only apply matches by slug alone.
func matchSlug[T any](a *applier, o *orgRun, kind string, existing []*T, id func(*T) int64, slugOf, nameOf func(*T) string,
	claimed map[int64]bool, name, slug string, sc SlugChange) (*T, error) {
	var by *T
	for _, e := range existing {
		if slugOf(e) == slug && !claimed[id(e)] {
			by = e
		}
	}
	if by == nil && !a.opt.CreateOnly {
		for _, e := range existing {
			if sc.PreviousSlug != "" && slugOf(e) == sc.PreviousSlug && !claimed[id(e)] {
				by = e
			}
		}
		if by == nil && sc.PreviousSlug == "" {
			var same []*T
			for _, e := range existing {
				if nameOf(e) == name && slugOf(e) != slug && !claimed[id(e)] && !o.named[slugOf(e)] {
					same = append(same, e)
				}
			}
			if len(same) == 1 {
				by = same[0]
			}
		}
	}
	if by == nil {
		return nil, nil
	}
	claimed[id(by)] = true
	if old := slugOf(by); old != slug && !sc.AllowSlugChange {
		return nil, &Error{Kind: ErrInvalid, Code: CodeSlugImmutable,
			Message: fmt.Sprintf("the %s %s is %s in this file: a new slug changes every %s/<model> address, so it needs allow_slug_change: true on the entry (or give the entry another name to create a second %s)",
				kind, quote(old), quote(slug), quote(old), kind),
			Fields: map[string]string{"slug": "immutable"}}
	}
	return by, nil
}

func (a *applier) provider(ctx context.Context, o *orgRun, i int, dp *DesiredProvider) error {
	name, slug := dp.Name, dp.Slug
	nameAndSlug(fieldErrors{}, &name, &slug)
	c := Change{Kind: KindProvider, Name: o.name + "/" + slug, Entry: fmt.Sprintf("%s.providers[%d]", o.where, i)}
	var existing []*store.Provider
	for _, p := range a.ix.providers[o.id] {
		if p.DeletedAt == nil && !o.fleet[p.ID] {
			existing = append(existing, p)
		}
	}
	m, err := matchSlug(a, o, KindProvider, existing, func(p *store.Provider) int64 { return p.ID },
		func(p *store.Provider) string { return p.Slug }, func(p *store.Provider) string { return p.Name },
		o.claimedProviders, name, slug, dp.SlugChange)
	if err != nil {
		return a.fail(c, err)
	}
	if m == nil {
		in := dp.ProviderInput
		if a.opt.DryRun {
			in.Keys = slices.Clone(in.Keys)
			for k := range in.Keys {
				if in.Keys[k].Secret.IsZero() {
					in.Keys[k].Secret = dryRunSecret
				}
			}
		}
		return a.create(c, func() (string, error) { _, err := a.s.CreateProvider(ctx, o.name, in); return "", err })
	}
	before := providerView(*m)
	return a.update(ctx, c, func(s *Service, c *Change) ([]FieldChange, error) {
		v, err := s.UpdateProvider(ctx, o.name, m.Slug, providerPatch(dp.ProviderInput, name, slug), dp.AllowSlugChange)
		if err != nil {
			return nil, err
		}
		fields := diffViews(before, v, ignoring(append(viewNoise, "keys")...))
		keys, err := a.keys(ctx, s, c, o.name, slug, m.Keys, dp.Keys)
		return append(fields, keys...), err
	})
}

// keys brings the pool of provider slug (have, with secrets) to want; see
// Apply on how keys are matched.
func (a *applier) keys(ctx context.Context, s *Service, c *Change, org, slug string, have []store.ProviderKey, want []KeyInput) ([]FieldChange, error) {
	pair := make([]int, len(want)) // index in have, or -1
	used := make([]bool, len(have))
	for i, w := range want {
		pair[i] = -1
		if w.Secret.IsZero() {
			continue
		}
		for j, h := range have {
			if !used[j] && subtle.ConstantTimeCompare([]byte(h.Secret.Reveal()), []byte(w.Secret.Reveal())) == 1 {
				pair[i], used[j] = j, true
				break
			}
		}
	}
	var unknown []string
	for i, w := range want {
		if !w.Secret.IsZero() || !a.opt.DryRun {
			continue
		}
		for j, h := range have {
			if !used[j] && w.Ref != "" && h.Ref == w.Ref {
				pair[i], used[j] = j, true
				c.Notes = append(c.Notes, fmt.Sprintf("keys[%s]: no secret given; taken to be the pool key recorded with this ref", keyLabel(i, w)))
				break
			}
		}
		if pair[i] < 0 {
			unknown = append(unknown, keyLabel(i, w))
		}
	}
	var fields []FieldChange
	for i, w := range want {
		label, field := keyLabel(i, w), fmt.Sprintf("keys[%d]", i)
		if j := pair[i]; j >= 0 {
			h := have[j]
			id := strconv.FormatInt(h.ID, 10)
			if weight := checkWeight(fieldErrors{}, "", w.Weight); weight != h.Weight {
				if _, err := s.SetProviderKeyWeight(ctx, org, slug, id, KeyWeightInput{Weight: &weight}); err != nil {
					return nil, underField(err, field)
				}
				fields = append(fields, FieldChange{Field: "keys[" + label + "].weight", Old: strconv.Itoa(h.Weight), New: strconv.Itoa(weight)})
			}
			if h.Ref != w.Ref {
				if err := s.setProviderKeyRef(ctx, org, slug, h.ID, w.Ref); err != nil {
					return nil, underField(err, field)
				}
				fields = append(fields, FieldChange{Field: "keys[" + label + "].ref", Old: jsonString(h.Ref), New: jsonString(w.Ref)})
			}
			continue
		}
		if w.Secret.IsZero() && a.opt.DryRun {
			continue // unknown: neither added nor compared
		}
		k, err := s.AddProviderKey(ctx, org, slug, w)
		if err != nil {
			return nil, underField(err, field)
		}
		fields = append(fields, FieldChange{Field: "keys[" + label + "]", New: fmt.Sprintf("added, weight %d", k.Weight)})
	}
	if len(unknown) > 0 {
		c.Notes = append(c.Notes, "key pool not compared: no secret given for "+strings.Join(unknown, ", ")+
			"; an apply with the secrets may add or remove keys")
		return fields, nil
	}
	for j, h := range have {
		if used[j] {
			continue
		}
		if err := s.DeleteProviderKey(ctx, org, slug, strconv.FormatInt(h.ID, 10)); err != nil {
			return nil, err
		}
		old := fmt.Sprintf("weight %d", h.Weight)
		if h.Ref != "" {
			old = "ref " + h.Ref + ", " + old
		}
		fields = append(fields, FieldChange{Field: fmt.Sprintf("keys[id %d]", h.ID), Old: old, New: "removed"})
	}
	return fields, nil
}

// keyLabel names a key of the file in a plan: by its ref, else its index.
func keyLabel(i int, k KeyInput) string {
	if k.Ref != "" {
		return k.Ref
	}
	return strconv.Itoa(i)
}

func jsonString(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// underField puts the fields of a validation error under prefix (an
// error of a pool key's own call names "weight", the entry's "keys[0]").
func underField(err error, prefix string) error {
	var ae *Error
	if !errors.As(err, &ae) || len(ae.Fields) == 0 {
		return err
	}
	out := *ae
	out.Fields = make(map[string]string, len(ae.Fields))
	for f, msg := range ae.Fields {
		out.Fields[prefix+"."+f] = msg
	}
	return &out
}

func (a *applier) group(ctx context.Context, o *orgRun, i int, dg *DesiredGroup) error {
	name, slug := dg.Name, dg.Slug
	nameAndSlug(fieldErrors{}, &name, &slug)
	c := Change{Kind: KindGroup, Name: o.name + "/" + slug, Entry: fmt.Sprintf("%s.groups[%d]", o.where, i)}
	if err := a.keptProviders(o, "members", len(dg.Members), func(j int) string { return dg.Members[j].Provider }); err != nil {
		return a.fail(c, err)
	}
	m, err := matchSlug(a, o, KindGroup, a.ix.groups[o.id], func(g *store.Group) int64 { return g.ID },
		func(g *store.Group) string { return g.Slug }, func(g *store.Group) string { return g.Name },
		o.claimedGroups, name, slug, dg.SlugChange)
	if err != nil {
		return a.fail(c, err)
	}
	if m == nil {
		return a.create(c, func() (string, error) { _, err := a.s.CreateGroup(ctx, o.name, dg.GroupInput); return "", err })
	}
	before := groupView(*m)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.UpdateGroup(ctx, o.name, m.Slug, groupPatch(dg.GroupInput, name, slug), dg.AllowSlugChange)
		return diffViews(before, v, ignoring(viewNoise...)), err
	})
}

// keptProviders refuses, in a prune, an entry that names a provider the
// prune deletes: it would pass the Service's checks (the provider is still
// there) and break once the prune has run.
func (a *applier) keptProviders(o *orgRun, field string, n int, slug func(int) string) error {
	if !a.opt.Prune {
		return nil
	}
	fe := fieldErrors{}
	for j := range n {
		if s := slug(j); s != "" && !o.keep[s] {
			fe.add(fmt.Sprintf("%s[%d].provider", field, j), "names a provider that is not in the file, which --prune deletes")
		}
	}
	return fe.err()
}

func (a *applier) project(ctx context.Context, o *orgRun, i int, dp *DesiredProject) error {
	where := fmt.Sprintf("%s.projects[%d]", o.where, i)
	c := Change{Kind: KindProject, Name: o.name + "/" + dp.Name, Entry: where}
	cur := a.ix.project(o.id, dp.Name)
	if cur == nil {
		if err := a.create(c, func() (string, error) { _, err := a.s.CreateProject(ctx, o.name, dp.ProjectInput); return "", err }); err != nil {
			return err
		}
	} else {
		before := projectView(store.Org{Name: o.name}, *cur)
		if err := a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
			v, err := s.PatchProject(ctx, o.name, dp.Name, projectPatch(dp.ProjectInput))
			return diffViews(before, v, ignoring(viewNoise...)), err
		}); err != nil {
			return err
		}
	}
	var pid int64
	if cur != nil {
		pid = cur.ID
	}
	for ri := range dp.Routes {
		if err := a.route(ctx, o, dp.Name, pid, fmt.Sprintf("%s.routes[%d]", where, ri), &dp.Routes[ri]); err != nil {
			return err
		}
	}
	for ki := range dp.Keys {
		if err := a.virtualKey(ctx, o, dp.Name, pid, fmt.Sprintf("%s.keys[%d]", where, ki), &dp.Keys[ki]); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) route(ctx context.Context, o *orgRun, project string, pid int64, where string, r *RouteInput) error {
	c := Change{Kind: KindRoute, Name: o.name + "/" + project + "/" + r.Model, Entry: where}
	if err := a.keptProviders(o, "targets", len(r.Targets), func(j int) string { return r.Targets[j].Provider }); err != nil {
		return a.fail(c, err)
	}
	var cur *store.Route
	for _, rt := range a.ix.routes[pid] {
		if rt.Model == r.Model {
			cur = rt
		}
	}
	if cur == nil {
		return a.create(c, func() (string, error) { _, err := a.s.CreateRoute(ctx, o.name, project, *r); return "", err })
	}
	var kept []TargetInput
	for _, t := range cur.Targets {
		if o.fleet[t.ProviderID] {
			w := t.Weight
			kept = append(kept, TargetInput{Provider: t.ProviderSlug, UpstreamModel: t.UpstreamModel, Weight: &w,
				ContextLimit: t.ContextLimit, Prices: pricesInput(t.Prices)})
		}
	}
	before := o.withoutFleet(routeView(*cur))
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.PatchRoute(ctx, o.name, project, r.Model, routePatch(*r, kept))
		return diffViews(before, o.withoutFleet(v), ignoring(viewNoise...)), err
	})
}

// withoutFleet leaves the fleet's targets out of a route's view.
func (o *orgRun) withoutFleet(v RouteView) RouteView {
	fleet := map[string]bool{}
	for _, h := range o.hosts {
		if h.ProviderID != 0 {
			fleet[h.ProviderSlug] = true
		}
	}
	v.Targets = slices.DeleteFunc(slices.Clone(v.Targets), func(t TargetView) bool { return fleet[t.Provider] })
	return v
}

func (a *applier) virtualKey(ctx context.Context, o *orgRun, project string, pid int64, where string, k *VirtualKeyInput) error {
	c := Change{Kind: KindVirtualKey, Name: o.name + "/" + project + "/" + k.Name, Entry: where}
	var live []*store.VirtualKey
	for _, vk := range a.ix.keys[pid] {
		if vk.RevokedAt == nil && vk.Name == k.Name {
			live = append(live, vk)
		}
	}
	switch {
	case len(live) == 0:
		return a.create(c, func() (string, error) {
			v, err := a.s.CreateVirtualKey(ctx, o.name, project, *k)
			return v.Secret, err
		})
	case len(live) > 1 && !a.opt.CreateOnly:
		return a.fail(c, &Error{Kind: ErrConflict, Code: CodeConflict,
			Message: fmt.Sprintf("%d live virtual keys of the project are named %s: revoke all but one, or rename them, so that the entry names one key", len(live), quote(k.Name))})
	}
	cur := live[0]
	before := keyView(*cur)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		v, err := s.PatchVirtualKey(ctx, o.name, project, strconv.FormatInt(cur.ID, 10), keyPatch(*k, cur))
		return diffViews(before, v, ignoring(viewNoise...)), err
	})
}

// canonicalIP is ip as the Service stores it, for matching; ip itself
// when it is no address (the Service refuses it on create).
func canonicalIP(ip string) string {
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return ip
	}
	return addr.Unmap().String()
}

func hostName(org, ip string, port int) string {
	return org + "/" + net.JoinHostPort(canonicalIP(ip), strconv.Itoa(port))
}

func (a *applier) host(ctx context.Context, o *orgRun, i int, h *HostInput) error {
	c := Change{Kind: KindHost, Name: hostName(o.name, h.IP, h.Port), Entry: fmt.Sprintf("%s.hosts[%d]", o.where, i)}
	var cur *store.Host
	for j := range o.hosts {
		x := &o.hosts[j]
		if x.State != store.HostRetired && x.IP == canonicalIP(h.IP) && x.Port == h.Port {
			cur = x
		}
	}
	if cur == nil {
		return a.create(c, func() (string, error) {
			v, err := a.s.CreateHost(ctx, o.name, *h)
			return v.APIKey, err
		})
	}
	project := h.Project
	if project == "" {
		project = "default"
	}
	curProject := a.ix.projectName(cur.ProjectID)
	before := a.s.hostView(cur, curProject)
	return a.update(ctx, c, func(s *Service, _ *Change) ([]FieldChange, error) {
		p := HostPatch{Recipe: &h.Recipe, Notes: &h.Notes, AutoApply: &h.AutoApply, DrainTimeout: h.DrainTimeout}
		// A host's project and model are its identity: the Service
		// refuses to change them, with its own error.
		if project != curProject {
			p.Project = &project
		}
		if h.ModelName != cur.ModelName {
			p.ModelName = &h.ModelName
		}
		v, err := s.PatchHost(ctx, o.name, strconv.FormatInt(cur.ID, 10), p)
		return diffViews(before, v, only("port", "recipe", "notes", "auto_apply")), err
	})
}

// prune deletes what org o holds and do does not.
func (a *applier) prune(ctx context.Context, o *orgRun, do *DesiredOrg) error {
	served := map[int64]map[string]bool{} // project id → models live hosts serve
	for _, h := range o.hosts {
		if h.State != store.HostRetired {
			if served[h.ProjectID] == nil {
				served[h.ProjectID] = map[string]bool{}
			}
			served[h.ProjectID][h.ModelName] = true
		}
	}
	for _, pj := range a.ix.projects[o.id] {
		var dp *DesiredProject
		for i := range do.Projects {
			if do.Projects[i].Name == pj.Name {
				dp = &do.Projects[i]
			}
		}
		pname := o.name + "/" + pj.Name
		fleetRoutes := 0
		for _, r := range a.ix.routes[pj.ID] {
			fleet := served[pj.ID][r.Model]
			for _, t := range r.Targets {
				fleet = fleet || o.fleet[t.ProviderID]
			}
			if fleet {
				fleetRoutes++
				continue
			}
			if dp != nil && slices.ContainsFunc(dp.Routes, func(x RouteInput) bool { return x.Model == r.Model }) {
				continue
			}
			if err := a.remove(Change{Kind: KindRoute, Name: pname + "/" + r.Model}, func() error {
				return a.s.DeleteRoute(ctx, o.name, pj.Name, r.Model)
			}); err != nil {
				return err
			}
		}
		for _, k := range a.ix.keys[pj.ID] {
			if k.RevokedAt != nil || dp != nil && slices.ContainsFunc(dp.Keys, func(x VirtualKeyInput) bool { return x.Name == k.Name }) {
				continue
			}
			c := Change{Kind: KindVirtualKey, Name: pname + "/" + k.Name, Notes: []string{"revoked; the record stays for the audit trail"}}
			if err := a.remove(c, func() error {
				_, err := a.s.RevokeVirtualKey(ctx, o.name, pj.Name, strconv.FormatInt(k.ID, 10))
				return err
			}); err != nil {
				return err
			}
		}
		if dp != nil {
			continue
		}
		c := Change{Kind: KindProject, Name: pname}
		if n := len(a.ix.keys[pj.ID]); n > 0 {
			c.Notes = []string{fmt.Sprintf("its %d virtual keys, revoked, are purged with it (usage records keep their ids)", n)}
		}
		if fleetRoutes > 0 {
			c.Notes = append(c.Notes, fmt.Sprintf("%d of its routes are served by fleet hosts: retire the hosts first", fleetRoutes))
		}
		if err := a.remove(c, func() error {
			for _, k := range a.ix.keys[pj.ID] {
				if err := a.s.PurgeVirtualKey(ctx, o.name, pj.Name, strconv.FormatInt(k.ID, 10)); err != nil {
					return err
				}
			}
			return a.s.DeleteProject(ctx, o.name, pj.Name)
		}); err != nil {
			return err
		}
	}
	for _, h := range o.hosts {
		if h.State == store.HostRetired || slices.ContainsFunc(do.Hosts, func(x HostInput) bool {
			return canonicalIP(x.IP) == h.IP && x.Port == h.Port
		}) {
			continue
		}
		c := Change{Kind: KindHost, Name: hostName(o.name, h.IP, h.Port), Notes: []string{"retired; the record stays"}}
		if err := a.remove(c, func() error {
			_, err := a.s.RetireHost(ctx, o.name, strconv.FormatInt(h.ID, 10))
			return err
		}); err != nil {
			return err
		}
	}
	for _, g := range a.ix.groups[o.id] {
		if o.claimedGroups[g.ID] {
			continue
		}
		if err := a.remove(Change{Kind: KindGroup, Name: o.name + "/" + g.Slug}, func() error {
			return a.s.DeleteGroup(ctx, o.name, g.Slug)
		}); err != nil {
			return err
		}
	}
	for _, p := range a.ix.providers[o.id] {
		if p.DeletedAt != nil || o.fleet[p.ID] || o.claimedProviders[p.ID] {
			continue
		}
		c := Change{Kind: KindProvider, Name: o.name + "/" + p.Slug, Notes: []string{"soft-deleted: its slug stays reserved until it is purged"}}
		if err := a.remove(c, func() error { return a.s.DeleteProvider(ctx, o.name, p.Slug, false) }); err != nil {
			return err
		}
	}
	return nil
}

// allHosts reads every host of an org, retired ones included.
func allHosts(ctx context.Context, st store.Store, orgID int64) ([]store.Host, error) {
	var out []store.Host
	page := store.Page{Limit: 1000}
	for {
		rows, err := st.ListHosts(ctx, orgID, page)
		if err != nil {
			return nil, fromStore(err, "hosts")
		}
		out = append(out, rows...)
		if len(rows) < page.Limit {
			return out, nil
		}
		page.After = rows[len(rows)-1].ID
	}
}

// stateIndex is a loaded state by parent, each list in id order.
type stateIndex struct {
	orgs      map[string]*store.Org
	projects  map[int64][]*store.Project // by org id
	providers map[int64][]*store.Provider
	groups    map[int64][]*store.Group
	routes    map[int64][]*store.Route // by project id
	keys      map[int64][]*store.VirtualKey
	names     map[int64]string // project names by id
}

func newStateIndex(st *store.State) *stateIndex {
	ix := &stateIndex{orgs: map[string]*store.Org{}, projects: map[int64][]*store.Project{}, providers: map[int64][]*store.Provider{},
		groups: map[int64][]*store.Group{}, routes: map[int64][]*store.Route{}, keys: map[int64][]*store.VirtualKey{}, names: map[int64]string{}}
	for i := range st.Orgs {
		ix.orgs[st.Orgs[i].Name] = &st.Orgs[i]
	}
	for i := range st.Projects {
		p := &st.Projects[i]
		ix.projects[p.OrgID] = append(ix.projects[p.OrgID], p)
		ix.names[p.ID] = p.Name
	}
	for i := range st.Providers {
		p := &st.Providers[i]
		ix.providers[p.OrgID] = append(ix.providers[p.OrgID], p)
	}
	for i := range st.Groups {
		g := &st.Groups[i]
		ix.groups[g.OrgID] = append(ix.groups[g.OrgID], g)
	}
	for i := range st.Routes {
		r := &st.Routes[i]
		ix.routes[r.ProjectID] = append(ix.routes[r.ProjectID], r)
	}
	for i := range st.VirtualKeys {
		k := &st.VirtualKeys[i]
		ix.keys[k.ProjectID] = append(ix.keys[k.ProjectID], k)
	}
	return ix
}

func (ix *stateIndex) project(orgID int64, name string) *store.Project {
	for _, p := range ix.projects[orgID] {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (ix *stateIndex) projectName(id int64) string {
	if n, ok := ix.names[id]; ok {
		return n
	}
	return strconv.FormatInt(id, 10)
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
		slugs, projects, hosts := map[string]string{}, map[string]string{}, map[string]string{}
		for i, p := range o.Providers {
			name, slug := p.Name, p.Slug
			nameAndSlug(fieldErrors{}, &name, &slug)
			if err := repeats(slugs, slug, fmt.Sprintf("%s.providers[%d]", where, i), KindProvider, o.Name+"/"+slug, "slug"); err != nil {
				return err
			}
		}
		for i, g := range o.Groups {
			name, slug := g.Name, g.Slug
			nameAndSlug(fieldErrors{}, &name, &slug)
			if err := repeats(slugs, slug, fmt.Sprintf("%s.groups[%d]", where, i), KindGroup, o.Name+"/"+slug, "slug"); err != nil {
				return err
			}
		}
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
