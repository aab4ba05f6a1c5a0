package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

// maxApplyBody bounds the body of POST /apply: a whole configuration of
// up to admin.MaxApplyEntries entries, whose entries are counted before
// it is decoded (admin.CheckDesiredJSON). 10,000 routes over 1,000
// providers take 1.3 MiB with short names and about 3 MiB with names as
// long as real ones; 5,000 virtual keys with a name each take 0.1 MiB.
const maxApplyBody = 8 << 20

// apply reconciles the store with the desired state in the body, in one
// transaction (admin.Service.Apply); ?dry_run=true rolls it back and
// answers the plan, ?prune=true deletes what the named orgs hold and the
// body does not.
func (h *Handler) apply(w http.ResponseWriter, r *http.Request) error {
	var opt admin.ApplyOptions
	var err error
	if opt.DryRun, err = boolQuery(r, "dry_run"); err != nil {
		return err
	}
	if opt.Prune, err = boolQuery(r, "prune"); err != nil {
		return err
	}
	// The turn comes first: a second concurrent apply is refused before
	// its body (up to 8 MiB, ten times that decoded) is read.
	turn, err := h.svc.TakeApplyTurn()
	if err != nil {
		return err
	}
	defer turn.Release()
	var in admin.Desired
	if err := decodeChecked(w, r, &in, maxApplyBody, admin.CheckDesiredJSON); err != nil {
		return err
	}
	res, err := turn.Apply(r.Context(), in, opt)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// export answers the current state as a desired state, without secrets.
func (h *Handler) export(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.Desired, error) { return h.svc.Export(r.Context()) })
}
