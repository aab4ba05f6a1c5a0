package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// VirtualKeyInput creates a virtual key. The secret is generated.
type VirtualKeyInput struct {
	Name      string     `json:"name"`
	Models    []string   `json:"models,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RPMLimit  int        `json:"rpm_limit,omitempty"`
	TPMLimit  int        `json:"tpm_limit,omitempty"`
	// Budget caps the key's spend per period; absent: none.
	Budget *BudgetInput `json:"budget,omitempty"`
}

// VirtualKeyView is a virtual key as the API shows it. Secret is set only
// in the create response; Prefix is the public part that identifies the key
// in listings.
type VirtualKeyView struct {
	ID        int64         `json:"id"`
	Name      string        `json:"name"`
	Secret    string        `json:"secret,omitempty"`
	Prefix    string        `json:"prefix"`
	Models    []string      `json:"models"`
	RPMLimit  int           `json:"rpm_limit,omitempty"`
	TPMLimit  int           `json:"tpm_limit,omitempty"`
	Budget    *store.Budget `json:"budget,omitempty"`
	ExpiresAt *time.Time    `json:"expires_at,omitempty"`
	RevokedAt *time.Time    `json:"revoked_at,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
}

func keyView(k store.VirtualKey) VirtualKeyView {
	models := k.Models
	if models == nil {
		models = []string{}
	}
	return VirtualKeyView{ID: k.ID, Name: k.Name, Prefix: secret.PrefixVirtualKey + k.Lookup, Models: models,
		RPMLimit: k.RPMLimit, TPMLimit: k.TPMLimit, Budget: budgetView(k.Budget), ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt}
}

// CreateVirtualKey mints a key in a project. The returned view is the only
// place the secret ever appears.
func (s *Service) CreateVirtualKey(ctx context.Context, org, project string, in VirtualKeyInput) (VirtualKeyView, error) {
	_, pj, err := s.project(ctx, org, project)
	if err != nil {
		return VirtualKeyView{}, err
	}
	fe := fieldErrors{}
	budget := s.checkKey(fe, in)
	if err := fe.err(); err != nil {
		return VirtualKeyView{}, err
	}
	tok, lookup := secret.Mint(secret.PrefixVirtualKey)
	k := &store.VirtualKey{ProjectID: pj.ID, Name: in.Name, Lookup: lookup, Hash: secret.HashOf(tok.Reveal()),
		Models: in.Models, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit, Budget: budget, ExpiresAt: in.ExpiresAt}
	if err := s.committed(ctx, fromStore(s.st.CreateVirtualKey(ctx, k), "virtual key")); err != nil {
		return VirtualKeyView{}, err
	}
	v := keyView(*k)
	v.Secret = tok.Reveal()
	return v, nil
}

// checkKey validates the fields a key is created with, and those a PATCH
// leaves it with: one rule for both. It returns the budget as stored.
func (s *Service) checkKey(fe fieldErrors, in VirtualKeyInput) store.Budget {
	if strings.TrimSpace(in.Name) == "" || len(in.Name) > 200 {
		fe.add("name", "is required (1-200 characters)")
	}
	for i, m := range in.Models {
		checkModelName(fe, fmt.Sprintf("models[%d]", i), m)
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(s.now()) {
		fe.add("expires_at", "must be in the future")
	}
	checkRateLimit(fe, "rpm_limit", in.RPMLimit)
	checkRateLimit(fe, "tpm_limit", in.TPMLimit)
	return checkBudget(fe, "budget", in.Budget)
}

func (s *Service) virtualKey(ctx context.Context, org, project, id string) (*store.VirtualKey, error) {
	_, pj, err := s.project(ctx, org, project)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, notFound("virtual key %s not found", quote(id))
	}
	k, err := s.st.GetVirtualKey(ctx, pj.ID, n)
	if err != nil {
		return nil, fromStore(err, "virtual key "+quote(id))
	}
	return k, nil
}

// RevokeVirtualKey revokes a key; the record stays, with revoked_at, for
// the audit trail.
func (s *Service) RevokeVirtualKey(ctx context.Context, org, project, id string) (VirtualKeyView, error) {
	k, err := s.virtualKey(ctx, org, project, id)
	if err != nil {
		return VirtualKeyView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.RevokeVirtualKey(ctx, k.ID, s.now()), "virtual key")); err != nil {
		return VirtualKeyView{}, err
	}
	return s.freshKeyView(ctx, k)
}

// freshKeyView reads k back after a write, for the answer.
func (s *Service) freshKeyView(ctx context.Context, k *store.VirtualKey) (VirtualKeyView, error) {
	fresh, err := s.st.GetVirtualKey(ctx, k.ProjectID, k.ID)
	if err != nil {
		return VirtualKeyView{}, fromStore(err, "virtual key")
	}
	return keyView(*fresh), nil
}

// PurgeVirtualKey removes a revoked key (ErrConflict, CodeKeyNotRevoked,
// for a live one), so that its project can be deleted; usage records keep
// the key's id as a plain number.
func (s *Service) PurgeVirtualKey(ctx context.Context, org, project, id string) error {
	k, err := s.virtualKey(ctx, org, project, id)
	if err != nil {
		return err
	}
	err = s.st.DeleteVirtualKey(ctx, k.ProjectID, k.ID)
	if errors.Is(err, store.ErrNotRevoked) {
		return &Error{Kind: ErrConflict, Code: CodeKeyNotRevoked,
			Message: "only a revoked key can be purged: DELETE it without ?purge=true first"}
	}
	return s.committed(ctx, fromStore(err, "virtual key"))
}

// HasLiveVirtualKey reports whether the project has a key with this name
// that is not revoked; the config importer uses it to stay idempotent.
func (s *Service) HasLiveVirtualKey(ctx context.Context, org, project, name string) (bool, error) {
	_, pj, err := s.project(ctx, org, project)
	if err != nil {
		return false, err
	}
	page := store.Page{Limit: 500}
	for {
		rows, err := s.st.ListVirtualKeys(ctx, pj.ID, page)
		if err != nil {
			return false, fromStore(err, "virtual keys")
		}
		for _, k := range rows {
			if k.Name == name && k.RevokedAt == nil {
				return true, nil
			}
		}
		if len(rows) < page.Limit {
			return false, nil
		}
		page.After = rows[len(rows)-1].ID
	}
}
