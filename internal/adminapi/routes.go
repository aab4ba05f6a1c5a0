package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listRoutes(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.RouteView], error) {
		return h.svc.ListRoutes(r.Context(), r.PathValue("org"), r.PathValue("project"), pr)
	})
}

func (h *Handler) createRoute(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.RouteInput) (any, error) {
		return h.svc.CreateRoute(r.Context(), r.PathValue("org"), r.PathValue("project"), in)
	})
}

func (h *Handler) getRoute(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.RouteView, error) {
		return h.svc.GetRoute(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("model"))
	})
}

func (h *Handler) patchRoute(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.RoutePatch) (any, error) {
		return h.svc.PatchRoute(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("model"), in)
	})
}

func (h *Handler) deleteRoute(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, h.svc.DeleteRoute(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("model")))
}
