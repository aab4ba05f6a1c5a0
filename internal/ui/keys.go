package ui

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// The Keys page: a project's virtual keys. Mint one (its secret is shown
// once, in the answer to the POST), edit its allowlist, rate limits,
// budget and expiry, revoke it, and purge a revoked one.
func init() {
	mount("keys", func(u *UI) {
		u.get("/keys", u.keyList)
		u.get("/keys/_new", u.keyNew)
		u.post("/keys/_new", u.keyCreate)
		u.get("/keys/{id}", u.keyDetail)
		u.post("/keys/{id}", u.keyUpdate)
		u.post("/keys/{id}/revoke", u.keyRevoke)
		u.post("/keys/{id}/purge", u.keyPurge)
	})
}

// keysPage is the data of keys.html; Mode is "list", "new" or "detail".
type keysPage struct {
	Mode string
	// List: the keys shown, how many are active, how many are revoked,
	// and whether revoked keys are shown.
	Keys            []keyRow
	Active, Revoked int
	ShowRevoked     bool
	// Detail: the key.
	K keyRow
	// New and detail: the form as typed and its error; an error of a
	// revoke or purge.
	Form      keyForm
	Err       *formErr
	ActionErr *formErr
	// Done names what the last action did; DoneKey is the key's name.
	Done, DoneKey string
	// Minted is a new key's secret, shown once.
	Minted  *minted
	Periods []string
}

// keyRow is a virtual key as the page shows it.
type keyRow struct {
	admin.VirtualKeyView
	now time.Time
}

// State is the key's status word: active, expired or revoked.
func (k keyRow) State() string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !k.ExpiresAt.After(k.now):
		return "expired"
	}
	return "active"
}

// Revoked reports a revoked key (it can be purged, not edited).
func (k keyRow) Revoked() bool { return k.RevokedAt != nil }

// Allow is the allowlist in a few words.
func (k keyRow) Allow() string {
	if len(k.Models) == 0 {
		return "any model"
	}
	return strings.Join(k.Models, ", ")
}

// Limits are the rate limits in a few words.
func (k keyRow) Limits() string {
	var parts []string
	if k.RPMLimit > 0 {
		parts = append(parts, strconv.Itoa(k.RPMLimit)+" requests/min")
	}
	if k.TPMLimit > 0 {
		parts = append(parts, strconv.Itoa(k.TPMLimit)+" tokens/min")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " · ")
}

// BudgetText is the budget in a few words.
func (k keyRow) BudgetText() string {
	if k.Budget == nil {
		return "none"
	}
	return "$" + k.Budget.Amount.USD() + " per " + k.Budget.Period
}

// keyForm is the key form as typed.
type keyForm struct {
	Name, Models, RPM, TPM, Amount, Period, ExpiresAt string
}

// expiresLayout is how the form shows an expiry: what <input
// type="datetime-local"> sends, read as UTC.
const expiresLayout = "2006-01-02T15:04"

func readKeyForm(r *request) keyForm {
	f := func(name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }
	return keyForm{Name: f("name"), Models: r.PostForm.Get("models"), RPM: f("rpm_limit"), TPM: f("tpm_limit"),
		Amount: f("budget.amount"), Period: f("budget.period"), ExpiresAt: f("expires_at")}
}

// keyFormOf fills the form from a stored key.
func keyFormOf(k admin.VirtualKeyView) keyForm {
	f := keyForm{Name: k.Name, Models: strings.Join(k.Models, "\n"), RPM: num(k.RPMLimit), TPM: num(k.TPMLimit)}
	if k.Budget != nil {
		f.Amount, f.Period = k.Budget.Amount.USD(), k.Budget.Period
	}
	if k.ExpiresAt != nil {
		f.ExpiresAt = k.ExpiresAt.UTC().Format(expiresLayout)
	}
	return f
}

// input converts the form; what does not parse is reported by the API's
// field name. modelLines maps each allowlist entry to its line.
func (f keyForm) input(fe map[string]string) (in admin.VirtualKeyInput, modelLines []int) {
	in = admin.VirtualKeyInput{Name: f.Name}
	in.Models, modelLines = listLines(f.Models)
	in.RPMLimit = parseInt(fe, "rpm_limit", f.RPM)
	in.TPMLimit = parseInt(fe, "tpm_limit", f.TPM)
	if f.Amount != "" || f.Period != "" {
		in.Budget = &admin.BudgetInput{Amount: admin.Decimal(f.Amount), Period: f.Period}
	}
	in.ExpiresAt = parseExpiry(fe, f.ExpiresAt)
	return in, modelLines
}

// parseExpiry reads a datetime-local value (or RFC 3339) as UTC; nil for
// none.
func parseExpiry(fe map[string]string, s string) *time.Time {
	if s == "" {
		return nil
	}
	for _, layout := range []string{expiresLayout, "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return &t
		}
	}
	fe["expires_at"] = "must be a date and time in UTC, e.g. 2026-12-31T23:59"
	return nil
}

// postedKey reads the key form as posted into d and converts it to in;
// bad is the error of the fields that do not parse (nil: none). again is
// finish's again for the form: the form once more with its error (422),
// where the errors of single allowlist entries are folded onto the
// allowlist.
func (u *UI) postedKey(w http.ResponseWriter, r *request, v *view, d *keysPage) (in admin.VirtualKeyInput, again func(*formErr) error, bad *formErr) {
	d.Form = readKeyForm(r)
	fe := map[string]string{}
	in, modelLines := d.Form.input(fe)
	if len(fe) > 0 {
		bad = fieldsErr(fe)
	}
	return in, u.listFormAgain(w, r, v, &d.Err, "models", modelLines), bad
}

func (u *UI) keysView(r *request, mode string) (*view, *keysPage, error) {
	d := &keysPage{Mode: mode, Done: r.FormValue("done"), DoneKey: r.FormValue("key"),
		Periods: []string{"", store.PeriodDay, store.PeriodWeek, store.PeriodMonth}}
	v, err := u.dataView(r, "keys", true, d)
	return v, d, err
}

// keysLink is a link on the Keys page of v's project.
func keysLink(v *view, p string, kv ...string) string {
	return link(p, append([]string{"org", v.Org, "project", v.Project}, kv...)...)
}

func (u *UI) keyList(w http.ResponseWriter, r *request) error {
	v, d, err := u.keysView(r, "list")
	if err != nil {
		return err
	}
	if err := u.loadKeys(r, v, d); err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// loadKeys fills the list: the project's keys, newest first, revoked ones
// only when asked for.
func (u *UI) loadKeys(r *request, v *view, d *keysPage) error {
	keys, err := all(func(p admin.PageRequest) (admin.Page[admin.VirtualKeyView], error) {
		return u.svc.ListKeys(r.Context(), v.Org, v.Project, p)
	})
	if err != nil {
		return err
	}
	d.ShowRevoked = r.URL.Query().Get("revoked") == "show"
	now := time.Now()
	d.Keys, d.Active, d.Revoked = d.Keys[:0], 0, 0
	for _, k := range keys {
		row := keyRow{k, now}
		switch row.State() {
		case "revoked":
			d.Revoked++
			if !d.ShowRevoked {
				continue
			}
		case "active":
			d.Active++
		}
		d.Keys = append(d.Keys, row)
	}
	slices.SortFunc(d.Keys, func(a, b keyRow) int { return cmp.Compare(b.ID, a.ID) })
	return nil
}

func (u *UI) keyNew(w http.ResponseWriter, r *request) error {
	v, _, err := u.keysView(r, "new")
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

func (u *UI) keyCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.keysView(r, "new")
	if err != nil {
		return err
	}
	in, again, bad := u.postedKey(w, r, v, d)
	if bad != nil {
		return again(bad)
	}
	k, err := u.svc.CreateVirtualKey(r.Context(), v.Org, v.Project, in)
	if e, ok := asFormErr(err); ok {
		return again(e)
	} else if err != nil {
		return err
	}
	// The secret is in the create answer only: show it now, over the
	// list, and never again.
	d.Mode, d.Form, d.Done, d.DoneKey = "list", keyForm{}, "created", k.Name
	if err := u.loadKeys(r, v, d); err != nil {
		return err
	}
	d.Minted = &minted{Title: "Virtual key " + k.Name, Secret: k.Secret,
		Note: "Callers send it as Authorization: Bearer <key> (or x-api-key). Only its prefix " + k.Prefix + " is kept readable."}
	u.renderMinted(w, r, v, keysLink(v, "keys"))
	return nil
}

// key loads the key the path names into d.
func (u *UI) key(r *request, v *view, d *keysPage) error {
	k, err := u.svc.GetKey(r.Context(), v.Org, v.Project, r.PathValue("id"))
	if err != nil {
		return err
	}
	d.K, v.Title = keyRow{k, time.Now()}, "Key "+k.Name
	return nil
}

// keyAsStored loads the key the path names, its form as stored.
func (u *UI) keyAsStored(r *request, v *view, d *keysPage) error {
	if err := u.key(r, v, d); err != nil {
		return err
	}
	d.Form = keyFormOf(d.K.VirtualKeyView)
	return nil
}

func (u *UI) keyDetail(w http.ResponseWriter, r *request) error {
	v, _, err := itemView(r, u.keysView, u.keyAsStored)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// keyUpdate saves the edit form as a PATCH of every field. An expiry left
// as it was is not sent, so a key that has expired can still be edited
// (the Service would refuse a past expiry as input).
func (u *UI) keyUpdate(w http.ResponseWriter, r *request) error {
	v, d, err := itemView(r, u.keysView, u.key)
	if err != nil {
		return err
	}
	in, again, bad := u.postedKey(w, r, v, d)
	if bad != nil {
		return again(bad)
	}
	p := admin.VirtualKeyPatch{Name: &in.Name, Models: &in.Models, RPMLimit: &in.RPMLimit, TPMLimit: &in.TPMLimit}
	if in.Models == nil {
		p.Models = &[]string{}
	}
	p.Budget.Set, p.Budget.Value = true, in.Budget
	if d.Form.ExpiresAt != keyFormOf(d.K.VirtualKeyView).ExpiresAt {
		p.ExpiresAt = json.RawMessage("null")
		if in.ExpiresAt != nil {
			p.ExpiresAt, _ = json.Marshal(in.ExpiresAt)
		}
	}
	_, err = u.svc.PatchVirtualKey(r.Context(), v.Org, v.Project, r.PathValue("id"), p)
	return finish(w, r, err, again, keysLink(v, "keys/"+r.PathValue("id"), "done", "updated"))
}

func (u *UI) keyRevoke(w http.ResponseWriter, r *request) error {
	v, d, err := u.keysView(r, "detail")
	if err != nil {
		return err
	}
	k, err := u.svc.RevokeVirtualKey(r.Context(), v.Org, v.Project, r.PathValue("id"))
	to := keysLink(v, "keys/"+r.PathValue("id"), "done", "revoked")
	if fromList(r) {
		to = keysLink(v, "keys", "done", "revoked", "key", k.Name)
	}
	return finish(w, r, err, u.keyActionAgain(w, r, v, d), to)
}

func (u *UI) keyPurge(w http.ResponseWriter, r *request) error {
	v, d, err := u.keysView(r, "detail")
	if err != nil {
		return err
	}
	k, err := u.svc.GetKey(r.Context(), v.Org, v.Project, r.PathValue("id"))
	if err == nil {
		err = u.svc.PurgeVirtualKey(r.Context(), v.Org, v.Project, r.PathValue("id"))
	}
	return finish(w, r, err, u.keyActionAgain(w, r, v, d), keysLink(v, "keys", "done", "purged", "key", k.Name, "revoked", "show"))
}

// keyActionAgain is finish's again for a refused revoke or purge: on the
// list when it was pressed there, else on the key's page (a 404 for a key
// that is gone).
func (u *UI) keyActionAgain(w http.ResponseWriter, r *request, v *view, d *keysPage) func(*formErr) error {
	return u.actionAgain(w, r, v, &d.Mode, &d.ActionErr, func() error { return u.loadKeys(r, v, d) },
		func() error { return u.keyAsStored(r, v, d) })
}
