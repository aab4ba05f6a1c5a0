package ui

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// The Settings page: the org's fleet keys (mint, shown once; revoke), and
// for a global session the admin tokens (mint, shown once; revoke). An
// org-scoped session does not see the tokens section, and the Service
// refuses its token requests anyway (as not found).
func init() {
	mount("settings", func(u *UI) {
		u.get("/settings", u.settings)
		u.post("/settings/fleet-keys", u.fleetKeyCreate)
		u.post("/settings/fleet-keys/{id}/revoke", u.fleetKeyRevoke)
		u.post("/settings/tokens", u.tokenCreate)
		u.post("/settings/tokens/{id}/revoke", u.tokenRevoke)
	})
}

// settingsPage is the data of settings.html.
type settingsPage struct {
	// Global: the session's token is global, so it sees the admin tokens.
	Global bool
	// Fleet keys of the org, the active count, the mint form (its name)
	// and its error; an error of a revoke.
	FleetKeys      []fleetKeyRow
	ActiveFleet    int
	MaxFleet       int
	FleetName      string
	FleetErr       *formErr
	FleetActionErr *formErr
	// Admin tokens, the mint form and its error; an error of a revoke.
	Tokens         []tokenRow
	TokenForm      tokenForm
	TokenErr       *formErr
	TokenActionErr *formErr
	// Done names what the last action did; DoneName the object's name.
	Done, DoneName string
	// Minted is a new fleet key or token, shown once.
	Minted *minted
}

// fleetKeyRow is a fleet key as the page shows it.
type fleetKeyRow struct{ admin.FleetKeyView }

// State is active or revoked.
func (k fleetKeyRow) State() string {
	if k.RevokedAt != nil {
		return "revoked"
	}
	return "active"
}

// tokenRow is an admin token as the page shows it.
type tokenRow struct {
	admin.AdminTokenView
	// Mine: the session logged in with this token.
	Mine bool
	now  time.Time
}

// ScopeText is "global" or "org <name>".
func (t tokenRow) ScopeText() string {
	if org := scopeOrg(t.Scope); org != "" {
		return "org " + org
	}
	return "global"
}

// scopeOrg reads the org of a token view's scope ("global" or
// {"org": name}); "" for global.
func scopeOrg(scope any) string {
	b, err := json.Marshal(scope)
	if err != nil {
		return ""
	}
	var o struct {
		Org string `json:"org"`
	}
	if json.Unmarshal(b, &o) != nil {
		return ""
	}
	return o.Org
}

// State is active, expired or revoked.
func (t tokenRow) State() string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !t.ExpiresAt.After(t.now):
		return "expired"
	}
	return "active"
}

// SourceText says where the token came from.
func (t tokenRow) SourceText() string {
	switch t.Source {
	case store.AdminTokenEnv:
		return "ROLTER_ADMIN_TOKEN"
	case store.AdminTokenFirstStart:
		return "first start"
	}
	return "minted"
}

// FromEnv: the token is ROLTER_ADMIN_TOKEN, which only the environment
// changes.
func (t tokenRow) FromEnv() bool { return t.Source == store.AdminTokenEnv }

// tokenForm is the mint form as typed. Scope is "global" or "org:<name>".
type tokenForm struct {
	Name, Scope, ExpiresAt string
}

func (u *UI) settingsView(r *request) (*view, *settingsPage, error) {
	d := &settingsPage{Global: r.sess.scope.Global(), MaxFleet: admin.MaxActiveFleetKeys, Done: r.FormValue("done"),
		DoneName: r.FormValue("name"), TokenForm: tokenForm{Scope: "global"}}
	v, err := u.dataView(r, "settings", false, d)
	return v, d, err
}

// load fills both lists (the tokens only for a global session).
func (u *UI) loadSettings(r *request, v *view, d *settingsPage) error {
	keys, err := all(func(p admin.PageRequest) (admin.Page[admin.FleetKeyView], error) {
		return u.svc.ListFleetKeys(r.Context(), v.Org, p)
	})
	if err != nil {
		return err
	}
	d.FleetKeys, d.ActiveFleet = d.FleetKeys[:0], 0
	for _, k := range keys {
		d.FleetKeys = append(d.FleetKeys, fleetKeyRow{k})
		if k.RevokedAt == nil {
			d.ActiveFleet++
		}
	}
	// Active keys first, newest first.
	slices.SortStableFunc(d.FleetKeys, func(a, b fleetKeyRow) int {
		if (a.RevokedAt == nil) != (b.RevokedAt == nil) {
			if a.RevokedAt == nil {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if !d.Global {
		return nil
	}
	tokens, err := all(func(p admin.PageRequest) (admin.Page[admin.AdminTokenView], error) {
		return u.svc.ListTokens(r.Context(), p)
	})
	if err != nil {
		return err
	}
	mine, _ := secret.Lookup(secret.PrefixAdminToken, r.sess.token.Reveal())
	now := time.Now()
	d.Tokens = d.Tokens[:0]
	for _, t := range tokens {
		d.Tokens = append(d.Tokens, tokenRow{AdminTokenView: t, Mine: mine != "" && t.Prefix == secret.PrefixAdminToken+mine, now: now})
	}
	slices.SortStableFunc(d.Tokens, func(a, b tokenRow) int {
		if (a.State() == "active") != (b.State() == "active") {
			if a.State() == "active" {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return nil
}

func (u *UI) settings(w http.ResponseWriter, r *request) error {
	v, d, err := u.settingsView(r)
	if err != nil {
		return err
	}
	if err := u.loadSettings(r, v, d); err != nil {
		return err
	}
	u.render(w, http.StatusOK, v, "")
	return nil
}

// settingsErr is finish's again for a form or action of the page: the
// page once more with the error at *at.
func (u *UI) settingsErr(w http.ResponseWriter, r *request, v *view, d *settingsPage, at **formErr) func(*formErr) error {
	return func(e *formErr) error {
		*at = e
		return u.settingsAgain(w, r, v, d, http.StatusUnprocessableEntity)
	}
}

// settingsAgain shows the page again after a form or action: with an
// error (422), or with a minted secret (200, its dialog over the page).
func (u *UI) settingsAgain(w http.ResponseWriter, r *request, v *view, d *settingsPage, status int) error {
	if err := u.loadSettings(r, v, d); err != nil {
		return err
	}
	at := ""
	if status == http.StatusOK {
		at = link("settings", "org", v.Org)
	}
	u.renderForm(w, r, status, v, at)
	return nil
}

func (u *UI) fleetKeyCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.settingsView(r)
	if err != nil {
		return err
	}
	d.FleetName = strings.TrimSpace(r.PostForm.Get("name"))
	k, err := u.svc.CreateFleetKey(r.Context(), v.Org, admin.FleetKeyInput{Name: d.FleetName})
	if e, ok := asFormErr(err); ok {
		return u.settingsErr(w, r, v, d, &d.FleetErr)(e)
	} else if err != nil {
		return err
	}
	d.FleetName, d.Done, d.DoneName = "", "fleet-key-created", k.Name
	d.Minted = &minted{Title: "Fleet key " + k.Name, Secret: k.Secret,
		Note: "Boxes of org " + v.Org + " send it to fetch their assignments: put it in the box template as ROLTER_FLEET_KEY."}
	return u.settingsAgain(w, r, v, d, http.StatusOK)
}

func (u *UI) fleetKeyRevoke(w http.ResponseWriter, r *request) error {
	v, d, err := u.settingsView(r)
	if err != nil {
		return err
	}
	err = u.svc.RevokeFleetKey(r.Context(), v.Org, r.PathValue("id"))
	return finish(w, r, err, u.settingsErr(w, r, v, d, &d.FleetActionErr),
		link("settings", "org", v.Org, "done", "fleet-key-revoked", "name", r.URL.Query().Get("name")))
}

// scopeJSON turns the form's scope into the Service's: "global" or
// {"org": name}.
func scopeJSON(s string) json.RawMessage {
	if org, ok := strings.CutPrefix(s, "org:"); ok {
		b, _ := json.Marshal(map[string]string{"org": org})
		return b
	}
	b, _ := json.Marshal(s)
	return b
}

func (u *UI) tokenCreate(w http.ResponseWriter, r *request) error {
	v, d, err := u.settingsView(r)
	if err != nil {
		return err
	}
	d.TokenForm = tokenForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Scope: r.PostForm.Get("scope"),
		ExpiresAt: strings.TrimSpace(r.PostForm.Get("expires_at"))}
	again := u.settingsErr(w, r, v, d, &d.TokenErr)
	fe := map[string]string{}
	expires := parseExpiry(fe, d.TokenForm.ExpiresAt)
	if len(fe) > 0 && d.Global {
		return again(fieldsErr(fe))
	}
	t, err := u.svc.CreateAdminToken(r.Context(), admin.AdminTokenInput{Name: d.TokenForm.Name, Scope: scopeJSON(d.TokenForm.Scope),
		ExpiresAt: expires})
	if err != nil && !d.Global {
		return err // the Service refuses an org token: not found
	}
	if e, ok := asFormErr(err); ok {
		return again(e)
	} else if err != nil {
		return err
	}
	d.TokenForm, d.Done, d.DoneName = tokenForm{Scope: "global"}, "token-created", t.Name
	d.Minted = &minted{Title: "Admin token " + t.Name, Secret: t.Secret,
		Note: "Log in to this console with it, or send it to the admin API as Authorization: Bearer <token>."}
	return u.settingsAgain(w, r, v, d, http.StatusOK)
}

func (u *UI) tokenRevoke(w http.ResponseWriter, r *request) error {
	v, d, err := u.settingsView(r)
	if err != nil {
		return err
	}
	t, err := u.svc.RevokeAdminToken(r.Context(), r.PathValue("id"))
	if err != nil && !d.Global {
		return err
	}
	// Revoking the session's own token logs it out: the next request
	// (this redirect's) goes to the login page.
	return finish(w, r, err, u.settingsErr(w, r, v, d, &d.TokenActionErr),
		link("settings", "org", v.Org, "done", "token-revoked", "name", t.Name))
}
