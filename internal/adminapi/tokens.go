package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listTokens(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.AdminTokenView], error) {
		return h.svc.ListTokens(r.Context(), pr)
	})
}

func (h *Handler) createToken(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.AdminTokenInput) (any, error) { return h.svc.CreateAdminToken(r.Context(), in) })
}

func (h *Handler) getToken(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.AdminTokenView, error) { return h.svc.GetToken(r.Context(), r.PathValue("id")) })
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.AdminTokenView, error) { return h.svc.RevokeAdminToken(r.Context(), r.PathValue("id")) })
}
