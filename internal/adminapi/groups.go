package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listGroups(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.GroupView], error) {
		return h.svc.ListGroups(r.Context(), r.PathValue("org"), pr)
	})
}

func (h *Handler) createGroup(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.GroupInput) (any, error) { return h.svc.CreateGroup(r.Context(), r.PathValue("org"), in) })
}

func (h *Handler) getGroup(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.GroupView, error) {
		return h.svc.GetGroup(r.Context(), r.PathValue("org"), r.PathValue("slug"))
	})
}

func (h *Handler) patchGroup(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.GroupPatch) (any, error) {
		allow, err := boolQuery(r, "allow_slug_change")
		if err != nil {
			return nil, err
		}
		return h.svc.UpdateGroup(r.Context(), r.PathValue("org"), r.PathValue("slug"), in, allow)
	})
}

// deleteGroup soft-deletes a group (the slug stays reserved, the group
// leaves routing); ?purge=true removes it and frees the slug (purgeFlags).
func (h *Handler) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	purge, force, err := purgeFlags(r)
	if err != nil {
		return err
	}
	return noContent(w, h.svc.DeleteGroup(r.Context(), r.PathValue("org"), r.PathValue("slug"), purge, force))
}
