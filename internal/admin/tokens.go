package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	if err := requireGlobal(ctx, "admin tokens"); err != nil {
		return AdminTokenView{}, err
	}
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
	if err := s.committed(ctx, fromStore(s.st.CreateAdminToken(ctx, a), "admin token")); err != nil {
		return AdminTokenView{}, err
	}
	v := tokenView(*a)
	v.Secret = tok.Reveal()
	return v, nil
}

func (s *Service) adminToken(ctx context.Context, id string) (*store.AdminToken, error) {
	if err := requireGlobal(ctx, "admin token "+quote(id)); err != nil {
		return nil, err
	}
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
// (ErrConflict): the first is the environment's to change, and the second
// would lock every operator out until a restart with ROLTER_ADMIN_TOKEN
// set.
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
	if errors.Is(err, store.ErrLastAdminToken) {
		return AdminTokenView{}, &Error{Kind: ErrConflict, Code: CodeLastAdminToken,
			Message: "this is the last live global admin token; create another global token first"}
	}
	if err = s.committed(ctx, fromStore(err, "admin token")); err != nil {
		return AdminTokenView{}, err
	}
	fresh, err := s.st.GetAdminToken(ctx, a.ID)
	if err != nil {
		return AdminTokenView{}, fromStore(err, "admin token")
	}
	return tokenView(*fresh), nil
}

// NeverHadAdminToken reports whether the store has never held an admin
// token, revoked ones included: a store's first start.
func (s *Service) NeverHadAdminToken(ctx context.Context) (bool, error) {
	if err := requireGlobal(ctx, "admin tokens"); err != nil {
		return false, err
	}
	n, err := s.st.CountAdminTokens(ctx)
	if err != nil {
		return false, fromStore(err, "admin tokens")
	}
	return n == 0, nil
}

// MintFirstStartToken stores a new global admin token named "first start"
// and returns its secret, to be shown once. It is an ordinary global token:
// it stays valid until revoked.
func (s *Service) MintFirstStartToken(ctx context.Context) (secret.Secret, error) {
	if err := requireGlobal(ctx, "admin tokens"); err != nil {
		return secret.Secret{}, err
	}
	tok, lookup := secret.Mint(secret.PrefixAdminToken)
	err := s.st.CreateAdminToken(ctx, &store.AdminToken{Name: "first start", Hash: secret.HashOf(tok.Reveal()),
		Lookup: lookup, Source: store.AdminTokenFirstStart})
	if err = s.committed(ctx, fromStore(err, "admin token")); err != nil {
		return secret.Secret{}, err
	}
	return tok, nil
}

// CodeEnvTokenClash refuses a ROLTER_ADMIN_TOKEN whose value is already a
// token created through the API.
const CodeEnvTokenClash = "env_token_clash" //nolint:gosec // G101: an error code, not a credential

// SetEnvAdminToken makes tok the bootstrap token (ROLTER_ADMIN_TOKEN): a
// global token valid only while a start sets it. Its hash is stored, so
// that the other replicas accept it too, and any other value it had
// before is revoked; a zero tok revokes every earlier value.
func (s *Service) SetEnvAdminToken(ctx context.Context, tok secret.Secret) error {
	if err := requireGlobal(ctx, "admin tokens"); err != nil {
		return err
	}
	var hash *secret.Hash
	if !tok.IsZero() {
		h := secret.HashOf(tok.Reveal())
		hash = &h
	}
	err := s.st.SetEnvAdminToken(ctx, hash, s.now())
	var ce *store.ConflictError
	if errors.As(err, &ce) {
		return &Error{Kind: ErrConflict, Code: CodeEnvTokenClash,
			Message: "ROLTER_ADMIN_TOKEN has the value of a token created through the API; set a fresh value"}
	}
	return s.committed(ctx, fromStore(err, "ROLTER_ADMIN_TOKEN"))
}
