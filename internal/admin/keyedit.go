package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// Stable codes of virtual key edits.
const (
	// CodeKeyRevoked: a revoked key cannot be edited.
	CodeKeyRevoked = "key_revoked"
	// CodeKeyNotRevoked: only a revoked key can be purged.
	CodeKeyNotRevoked = "key_not_revoked"
)

// VirtualKeyPatch edits a virtual key without re-issuing its secret: absent
// fields stay. "expires_at": null clears the expiry; "models": [] allows
// every model. The result passes the same checks as a create (checkKey).
//
// EXTEND HERE: fields added to keys (budgets, issue 14 §2) get a pointer
// field in this struct and one line in apply; checkKey validates them.
type VirtualKeyPatch struct {
	Name     *string   `json:"name"`
	Models   *[]string `json:"models"`
	RPMLimit *int      `json:"rpm_limit"`
	TPMLimit *int      `json:"tpm_limit"`
	// ExpiresAt is kept raw to tell null (clear) from absent (keep).
	ExpiresAt json.RawMessage `json:"expires_at"`
	// Budget replaces the budget; null removes it.
	Budget nullable[BudgetInput] `json:"budget"`
}

// apply writes the patch onto in, the key's current fields.
func (p VirtualKeyPatch) apply(fe fieldErrors, in *VirtualKeyInput) {
	if p.Name != nil {
		in.Name = *p.Name
	}
	if p.Models != nil {
		in.Models = *p.Models
	}
	if p.RPMLimit != nil {
		in.RPMLimit = *p.RPMLimit
	}
	if p.TPMLimit != nil {
		in.TPMLimit = *p.TPMLimit
	}
	if p.Budget.Set {
		in.Budget = p.Budget.Value
	}
	switch raw := bytes.TrimSpace(p.ExpiresAt); {
	case len(raw) == 0: // absent: keep
	case string(raw) == "null":
		in.ExpiresAt = nil
	default:
		var t time.Time
		if json.Unmarshal(raw, &t) != nil {
			fe.add("expires_at", "must be an RFC 3339 time or null")
			return
		}
		in.ExpiresAt = &t
	}
}

// PatchVirtualKey edits a live key of the project. The data path sees the
// change at once: the snapshot is rebuilt before the response.
func (s *Service) PatchVirtualKey(ctx context.Context, org, project, id string, p VirtualKeyPatch) (VirtualKeyView, error) {
	k, err := s.virtualKey(ctx, org, project, id)
	if err != nil {
		return VirtualKeyView{}, err
	}
	if k.RevokedAt != nil {
		return VirtualKeyView{}, errKeyRevoked
	}
	in := VirtualKeyInput{Name: k.Name, Models: k.Models, ExpiresAt: k.ExpiresAt, RPMLimit: k.RPMLimit, TPMLimit: k.TPMLimit,
		Budget: budgetInput(k.Budget)}
	budget := k.Budget
	fe := fieldErrors{}
	p.apply(fe, &in)
	if len(fe) == 0 {
		// An unchanged expiry in the past is the key's state, not input.
		keep := p.ExpiresAt == nil && k.ExpiresAt != nil
		budget = s.checkKey(fe, in)
		if keep && fe["expires_at"] != "" {
			delete(fe, "expires_at")
		}
	}
	if err := fe.err(); err != nil {
		return VirtualKeyView{}, err
	}
	k.Name, k.Models, k.ExpiresAt, k.RPMLimit, k.TPMLimit, k.Budget = in.Name, in.Models, in.ExpiresAt, in.RPMLimit, in.TPMLimit, budget
	err = s.st.UpdateVirtualKey(ctx, k)
	if errors.Is(err, store.ErrRevoked) {
		return VirtualKeyView{}, errKeyRevoked
	}
	if err = s.committed(ctx, fromStore(err, "virtual key")); err != nil {
		return VirtualKeyView{}, err
	}
	return s.freshKeyView(ctx, k)
}

var errKeyRevoked = &Error{Kind: ErrConflict, Code: CodeKeyRevoked,
	Message: "a revoked key cannot be edited; create a new key"}
