package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Admin tokens (/admin/v1/tokens). Only a global token reaches these
// routes (see scope.go). A token is global or scoped to one org; its secret
// is shown once, in the create response, and only its SHA-256 hash is
// stored. DELETE revokes: the row stays, with revoked_at, for the audit
// trail. The ROLTER_ADMIN_TOKEN row (source "env") is managed by the
// environment, not by the API: it is valid exactly while a start sets it.

// Stable codes of the token API.
const (
	// CodeBootstrapToken: the token is ROLTER_ADMIN_TOKEN; change or unset
	// the variable and restart instead.
	CodeBootstrapToken = "bootstrap_token"
	// CodeLastAdminToken: revoking it would leave no live global token.
	CodeLastAdminToken = "last_admin_token"
)

// AdminTokenInput creates an admin token. Scope is "global" or
// {"org": "<name>"}; it is required, so that nobody mints a global token by
// leaving it out.
type AdminTokenInput struct {
	Name      string          `json:"name"`
	Scope     json.RawMessage `json:"scope"`
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
}

// AdminTokenView is an admin token as the API shows it. Secret is set only
// in the create response.
type AdminTokenView struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Scope     any        `json:"scope"` // "global" or {"org": name}
	Source    string     `json:"source"`
	Prefix    string     `json:"prefix,omitempty"`
	Secret    string     `json:"secret,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
}

type orgScopeJSON struct {
	Org string `json:"org"`
}

func tokenView(a store.AdminToken) AdminTokenView {
	v := AdminTokenView{ID: a.ID, Name: a.Name, Scope: "global", Source: a.Source,
		ExpiresAt: a.ExpiresAt, RevokedAt: a.RevokedAt, CreatedAt: a.CreatedAt}
	if a.OrgID != 0 {
		v.Scope = orgScopeJSON{Org: a.OrgName}
	}
	if a.Lookup != "" {
		v.Prefix = secret.PrefixAdminToken + a.Lookup
	}
	return v
}

// parseScope reads "global" or {"org": "<name>"} and returns the org name,
// "" for global.
func parseScope(fe fieldErrors, raw json.RawMessage) (org string, global bool) {
	const rule = `is required: "global" or {"org": "<org name>"}`
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		fe.add("scope", rule)
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != "global" {
			fe.add("scope", rule)
			return "", false
		}
		return "", true
	}
	var o orgScopeJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&o) != nil {
		fe.add("scope", rule)
		return "", false
	}
	if !namePattern.MatchString(o.Org) {
		fe.add("scope.org", nameRule)
		return "", false
	}
	return o.Org, false
}

// CreateAdminToken mints an admin token. The returned view is the only
// place the secret ever appears.
func (s *Service) CreateAdminToken(ctx context.Context, in AdminTokenInput) (AdminTokenView, error) {
	fe := fieldErrors{}
	if strings.TrimSpace(in.Name) == "" || len(in.Name) > 200 {
		fe.add("name", "is required (1-200 characters)")
	}
	orgName, global := parseScope(fe, in.Scope)
	if in.ExpiresAt != nil && !in.ExpiresAt.After(s.now()) {
		fe.add("expires_at", "must be in the future")
	}
	var org *store.Org
	if orgName != "" && len(fe) == 0 {
		o, err := s.st.GetOrg(ctx, orgName)
		switch {
		case errors.Is(err, store.ErrNotFound):
			fe.add("scope.org", "names no org")
		case err != nil:
			return AdminTokenView{}, fromStore(err, "org")
		}
		org = o
	}
	if err := fe.err(); err != nil {
		return AdminTokenView{}, err
	}
	tok, lookup := secret.Mint(secret.PrefixAdminToken)
	a := &store.AdminToken{Name: in.Name, Hash: secret.HashOf(tok.Reveal()), Lookup: lookup,
		Source: store.AdminTokenAPI, ExpiresAt: in.ExpiresAt}
	if !global {
		a.OrgID, a.OrgName = org.ID, org.Name
	}
	if err := s.st.CreateAdminToken(ctx, a); err != nil {
		return AdminTokenView{}, fromStore(err, "admin token")
	}
	s.changed(ctx)
	v := tokenView(*a)
	v.Secret = tok.Reveal()
	return v, nil
}

func (s *Service) adminToken(ctx context.Context, id string) (*store.AdminToken, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, notFound("admin token %s not found", quote(id))
	}
	a, err := s.st.GetAdminToken(ctx, n)
	if err != nil {
		return nil, fromStore(err, "admin token "+quote(id))
	}
	return a, nil
}

// RevokeAdminToken revokes a token at once, on every replica. The
// ROLTER_ADMIN_TOKEN token and the last live global token are refused
// (409): the first is the environment's to change, and the second would
// lock every operator out until a restart with ROLTER_ADMIN_TOKEN set.
func (s *Service) RevokeAdminToken(ctx context.Context, id string) (AdminTokenView, error) {
	a, err := s.adminToken(ctx, id)
	if err != nil {
		return AdminTokenView{}, err
	}
	if a.Source == store.AdminTokenEnv && a.RevokedAt == nil {
		return AdminTokenView{}, &Error{Kind: ErrConflict, Code: CodeBootstrapToken,
			Message: "this token is ROLTER_ADMIN_TOKEN: change or unset the variable and restart to invalidate it"}
	}
	err = s.st.RevokeAdminToken(ctx, a.ID, s.now())
	switch {
	case errors.Is(err, store.ErrLastAdminToken):
		return AdminTokenView{}, &Error{Kind: ErrConflict, Code: CodeLastAdminToken,
			Message: "this is the last live global admin token; create another global token first"}
	case err != nil:
		return AdminTokenView{}, fromStore(err, "admin token")
	}
	s.changed(ctx)
	fresh, err := s.st.GetAdminToken(ctx, a.ID)
	if err != nil {
		return AdminTokenView{}, fromStore(err, "admin token")
	}
	return tokenView(*fresh), nil
}

func (h *Handler) listTokens(w http.ResponseWriter, r *http.Request) error {
	page, limit, err := pageOf(r)
	if err != nil {
		return err
	}
	rows, err := h.svc.st.ListAdminTokens(r.Context(), page)
	if err != nil {
		return fromStore(err, "admin tokens")
	}
	writeJSON(w, http.StatusOK, paginate(rows, limit, func(a store.AdminToken) int64 { return a.ID }, tokenView))
	return nil
}

func (h *Handler) createToken(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in AdminTokenInput) (any, error) { return h.svc.CreateAdminToken(r.Context(), in) })
}

func (h *Handler) getToken(w http.ResponseWriter, r *http.Request) error {
	a, err := h.svc.adminToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tokenView(*a))
	return nil
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request) error {
	v, err := h.svc.RevokeAdminToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
