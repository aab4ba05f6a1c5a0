package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listOrgs(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.OrgView], error) { return h.svc.ListOrgs(r.Context(), pr) })
}

func (h *Handler) createOrg(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.OrgInput) (any, error) { return h.svc.CreateOrg(r.Context(), in) })
}

func (h *Handler) getOrg(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.OrgView, error) { return h.svc.GetOrg(r.Context(), r.PathValue("org")) })
}

func (h *Handler) patchOrg(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.OrgPatch) (any, error) { return h.svc.PatchOrg(r.Context(), r.PathValue("org"), in) })
}

func (h *Handler) deleteOrg(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, h.svc.DeleteOrg(r.Context(), r.PathValue("org")))
}

func (h *Handler) listProjects(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.ProjectView], error) {
		return h.svc.ListProjects(r.Context(), r.PathValue("org"), pr)
	})
}

func (h *Handler) createProject(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.ProjectInput) (any, error) {
		return h.svc.CreateProject(r.Context(), r.PathValue("org"), in)
	})
}

func (h *Handler) getProject(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.ProjectView, error) {
		return h.svc.GetProject(r.Context(), r.PathValue("org"), r.PathValue("project"))
	})
}

func (h *Handler) patchProject(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.ProjectPatch) (any, error) {
		return h.svc.PatchProject(r.Context(), r.PathValue("org"), r.PathValue("project"), in)
	})
}

func (h *Handler) deleteProject(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, h.svc.DeleteProject(r.Context(), r.PathValue("org"), r.PathValue("project")))
}
