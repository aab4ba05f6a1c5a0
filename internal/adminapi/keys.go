package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.VirtualKeyView], error) {
		return h.svc.ListKeys(r.Context(), r.PathValue("org"), r.PathValue("project"), pr)
	})
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.VirtualKeyInput) (any, error) {
		return h.svc.CreateVirtualKey(r.Context(), r.PathValue("org"), r.PathValue("project"), in)
	})
}

func (h *Handler) getKey(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.VirtualKeyView, error) {
		return h.svc.GetKey(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("id"))
	})
}

func (h *Handler) patchKey(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.VirtualKeyPatch) (any, error) {
		return h.svc.PatchVirtualKey(r.Context(), r.PathValue("org"), r.PathValue("project"), r.PathValue("id"), in)
	})
}

// deleteKey revokes; the record stays, with revoked_at, for the audit
// trail. With ?purge=true it removes a revoked key instead (409
// key_not_revoked for a live one), so that its project can be deleted;
// usage records keep the key's id as a plain number.
func (h *Handler) deleteKey(w http.ResponseWriter, r *http.Request) error {
	purge, err := boolQuery(r, "purge")
	if err != nil {
		return err
	}
	org, project, id := r.PathValue("org"), r.PathValue("project"), r.PathValue("id")
	if purge {
		return noContent(w, h.svc.PurgeVirtualKey(r.Context(), org, project, id))
	}
	return ok(w, r, func() (admin.VirtualKeyView, error) { return h.svc.RevokeVirtualKey(r.Context(), org, project, id) })
}
