package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Apply: declarative configuration (rolter apply, POST /admin/v1/apply,
// serve --config and rolter import, of a rolter file or a LiteLLM one).
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
// over, exported or pruned; a route or group an entry writes keeps its
// fleet targets or members (compared without them). Routes that fleet hosts
// serve and groups with a fleet member are never pruned; a group whose
// members are all the fleet's is not exported.
//
// Prune deletes what the orgs the desired state names hold and it does
// not: live virtual keys are revoked, routes and groups deleted, hosts
// retired, providers soft-deleted (their slugs stay reserved), and a
// project is deleted with its routes and keys (revoked keys purged).
// Orgs the desired state does not name are never read.
//
// Bounds. A desired state has at most MaxApplyEntries entries, refused
// before the store is touched; matching costs the same per entry however
// much exists (stateIndex). One apply runs at a time in a process (another
// is refused with apply_in_progress, not queued), and on PostgreSQL the
// apply's transaction takes an advisory lock, so that replicas take turns.
// A transactional apply that has not committed within ApplyTimeout is
// rolled back (apply_timeout): while it runs, other writers of a SQLite
// store wait for it.

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
	// SlugBase is set on a provider or group entry that names no slug
	// and was given a suffixed one by the backfill (design 000): the slug
	// its name derives, which another claimant holds.
	SlugBase string `json:"slug_base,omitempty"`
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

// ApplyTimeout is how long a transactional apply may run before it is
// rolled back (Service.SetApplyTimeout changes it).
const ApplyTimeout = time.Minute

// ApplyLock is the name of the store lock (store.TxLocker) an apply's
// transaction holds.
const ApplyLock = "apply"

var errApplyInProgress = &Error{Kind: ErrConflict, Code: CodeApplyInProgress,
	Message: "another apply is running on this server; retry when it has finished"}

// applyStopped is the error of an apply whose context ended before it
// committed: cause is the context's error, err what the apply failed with.
func applyStopped(cause, err error, timeout time.Duration) *Error {
	if !errors.Is(err, cause) {
		cause = errors.Join(cause, err)
	}
	where := ""
	var ae *ApplyError
	if errors.As(err, &ae) {
		where = " (at " + ae.where() + ")"
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		return &Error{Kind: ErrUnavailable, Code: CodeApplyTimeout, Err: cause,
			Message: fmt.Sprintf("the apply did not finish within %s and was rolled back%s: nothing changed; apply fewer entries at a time, or retry when the store is less busy", timeout, where)}
	}
	return &Error{Kind: ErrUnavailable, Code: CodeCanceled, Err: cause,
		Message: "the request was canceled before the apply finished; it was rolled back" + where + ": nothing changed"}
}

// dryRunSecret stands in, inside a dry run's rolled-back transaction, for
// a key secret the caller did not give, so that the rest of its entry is
// still checked.
var dryRunSecret = secret.New("rolter-dry-run-placeholder")

// Apply brings the store to d; see the comment above for the rules.
func (s *Service) Apply(ctx context.Context, d Desired, opt ApplyOptions) (ApplyResult, error) {
	turn, err := s.TakeApplyTurn()
	if err != nil {
		return ApplyResult{DryRun: opt.DryRun, Changes: []Change{}}, err
	}
	defer turn.Release()
	return turn.Apply(ctx, d, opt)
}

// ApplyTurn is this process's one apply at a time, taken before the
// desired state is read (POST /apply takes it before reading its body, so
// that concurrent requests do not each hold a decoded configuration).
type ApplyTurn struct {
	s    *Service
	once sync.Once
}

// TakeApplyTurn takes the turn to apply, or refuses with apply_in_progress
// while another apply holds it. The caller releases it.
func (s *Service) TakeApplyTurn() (*ApplyTurn, error) {
	select {
	case s.applying <- struct{}{}:
		return &ApplyTurn{s: s}, nil
	default:
		return nil, errApplyInProgress
	}
}

// Release gives the turn back; a second call does nothing.
func (t *ApplyTurn) Release() { t.once.Do(func() { <-t.s.applying }) }

// Apply is Service.Apply within the turn; a turn may apply more than once.
func (t *ApplyTurn) Apply(ctx context.Context, d Desired, opt ApplyOptions) (ApplyResult, error) {
	s := t.s
	res := ApplyResult{DryRun: opt.DryRun, Changes: []Change{}}
	if err := checkSize(d); err != nil {
		return res, err
	}
	if opt.CreateOnly && (opt.DryRun || opt.Prune) {
		return res, errors.New("admin: a create-only apply is neither a dry run nor a prune")
	}
	if opt.CreateOnly {
		return s.applyCreateOnly(ctx, d, opt, res)
	}
	timeout := s.applyTimeout
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := s.st.Tx(actx, func(st store.Store) error {
		if l, ok := st.(store.TxLocker); ok {
			if err := l.LockTx(actx, ApplyLock); err != nil {
				return fromStore(err, "the apply lock")
			}
		}
		in := s.inStore(st)
		if opt.DryRun {
			// What the Service logs of its writes (a host added, retired)
			// did not happen.
			in.log = slog.New(slog.DiscardHandler)
		}
		if err := (&applier{s: in, opt: opt, res: &res}).run(actx, d); err != nil {
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
	case err != nil && actx.Err() != nil:
		return ApplyResult{}, applyStopped(actx.Err(), err, timeout)
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

// applyCreateOnly is a create-only apply (serve --config, rolter import):
// one store transaction, each create in a savepoint of its own, announced
// once after the commit (issue 21: an import of 10,000 routes rebuilds the
// snapshot once, not 10,000 times). A failing entry's savepoint is rolled
// back and what was created before it is committed, as when every create
// committed on its own; res keeps it, secrets included, and a re-run skips
// it.
func (s *Service) applyCreateOnly(ctx context.Context, d Desired, opt ApplyOptions, res ApplyResult) (ApplyResult, error) {
	var runErr error
	err := s.st.Tx(ctx, func(st store.Store) error {
		runErr = (&applier{s: s.inStore(st), opt: opt, res: &res, savepoints: true}).run(ctx, d)
		return nil // keep what was created before a failure
	})
	if err != nil { // the commit failed: nothing was created
		if runErr != nil {
			return ApplyResult{Changes: []Change{}}, runErr
		}
		return ApplyResult{Changes: []Change{}}, fromStore(err, "the import's transaction")
	}
	if res.Count(ActionCreate) > 0 {
		s.changed(ctx)
	}
	return res, runErr
}

// applier is one run of Apply.
type applier struct {
	// s writes: inside the apply's transaction (CreateOnly's too).
	s   *Service
	opt ApplyOptions
	res *ApplyResult
	ix  *stateIndex
	// savepoints: each create runs in a savepoint of s's transaction, so
	// that a refused one (it exists already) leaves the others
	// (CreateOnly).
	savepoints bool
}

func (a *applier) run(ctx context.Context, d Desired) error {
	check := checkDesired
	if a.opt.CreateOnly {
		check = checkSlugs // it creates what is missing, but a slug is one entry's
	}
	if err := check(d); err != nil {
		return err
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
func (a *applier) create(ctx context.Context, c Change, fn func() (string, error)) error {
	var (
		sec string
		err error
	)
	if a.savepoints {
		outer := a.s
		err = outer.st.Tx(ctx, func(st store.Store) error {
			a.s = outer.inStore(st)
			defer func() { a.s = outer }()
			sec, err = fn()
			return err
		})
	} else {
		sec, err = fn()
	}
	switch {
	case err != nil && a.opt.CreateOnly && AlreadyExists(err) && !slugClash(c, err):
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

// slugClash reports whether err refuses c, a provider or group entry, its
// slug: no existing entry matched it, so another provider or group (a
// deleted one, the fleet's, the other kind) holds it. Backfilled slugs
// avoid those, so it is an explicit slug, and an error even in a
// create-only apply (design 000: an address the operator picked is never
// silently another's).
func slugClash(c Change, err error) bool {
	var ae *Error
	return (c.Kind == KindProvider || c.Kind == KindGroup) && errors.As(err, &ae) && ae.Code == CodeSlugTaken
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
