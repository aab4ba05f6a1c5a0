package sqlstore

import (
	"context"
	"errors"

	"github.com/rolter/rolter/internal/store"
)

// UpdateVirtualKey implements store.Store. The revoked_at guard sits in the
// UPDATE itself, so a revocation racing an edit either lands first (the
// edit is ErrRevoked) or after it; never is a revoked key changed.
func (s *DB) UpdateVirtualKey(ctx context.Context, k *store.VirtualKey) error {
	err := s.exec(ctx, s.qr, "",
		`UPDATE virtual_keys SET name = ?, models = ?, rpm_limit = ?, tpm_limit = ?, expires_at = ?, budget_nano = ?, budget_period = ?
		 WHERE project_id = ? AND id = ? AND revoked_at IS NULL`,
		k.Name, stringList(k.Models), k.RPMLimit, k.TPMLimit, optTime(k.ExpiresAt), int64(k.Budget.Amount), k.Budget.Period, k.ProjectID, k.ID)
	if errors.Is(err, store.ErrNotFound) {
		return s.whyUntouched(ctx, k.ProjectID, k.ID, store.ErrRevoked)
	}
	return err
}

// DeleteVirtualKey implements store.Store.
func (s *DB) DeleteVirtualKey(ctx context.Context, projectID, id int64) error {
	err := s.exec(ctx, s.qr, "",
		`DELETE FROM virtual_keys WHERE project_id = ? AND id = ? AND revoked_at IS NOT NULL`, projectID, id)
	if errors.Is(err, store.ErrNotFound) {
		return s.whyUntouched(ctx, projectID, id, store.ErrNotRevoked)
	}
	return err
}

// whyUntouched tells a guarded write that matched no row apart: the key is
// missing (ErrNotFound) or exists in the state the guard excluded (stateErr).
func (s *DB) whyUntouched(ctx context.Context, projectID, id int64, stateErr error) error {
	if _, err := s.GetVirtualKey(ctx, projectID, id); err != nil {
		return err
	}
	return stateErr
}
