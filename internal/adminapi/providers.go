package adminapi

import (
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listProviders(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.ProviderView], error) {
		return h.svc.ListProviders(r.Context(), r.PathValue("org"), pr)
	})
}

func (h *Handler) createProvider(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.ProviderInput) (any, error) {
		return h.svc.CreateProvider(r.Context(), r.PathValue("org"), in)
	})
}

func (h *Handler) getProvider(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.ProviderView, error) {
		return h.svc.GetProvider(r.Context(), r.PathValue("org"), r.PathValue("slug"))
	})
}

func (h *Handler) patchProvider(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.ProviderPatch) (any, error) {
		allow, err := boolQuery(r, "allow_slug_change")
		if err != nil {
			return nil, err
		}
		return h.svc.UpdateProvider(r.Context(), r.PathValue("org"), r.PathValue("slug"), in, allow)
	})
}

// deleteProvider soft-deletes (the slug stays reserved, the provider leaves
// routing); ?purge=true removes it and frees the slug (purgeFlags).
func (h *Handler) deleteProvider(w http.ResponseWriter, r *http.Request) error {
	purge, force, err := purgeFlags(r)
	if err != nil {
		return err
	}
	return noContent(w, h.svc.DeleteProvider(r.Context(), r.PathValue("org"), r.PathValue("slug"), purge, force))
}

// purgeFlags reads a provider's or group's DELETE: ?purge=true removes it
// and frees its slug; force (?force=true, or a body {"force": true})
// purges even while keys' allowlists name the slug, removing those
// entries (design 000 §3). force without purge is refused.
func purgeFlags(r *http.Request) (purge, force bool, err error) {
	if purge, err = boolQuery(r, "purge"); err != nil {
		return false, false, err
	}
	if force, err = applyForce(r); err != nil {
		return false, false, err
	}
	if force && !purge {
		return false, false, admin.Invalid(map[string]string{"force": "applies only to a purge: add ?purge=true"})
	}
	return purge, force, nil
}

func (h *Handler) listProviderKeys(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.Page[admin.KeyView], error) {
		p, err := h.svc.GetProvider(r.Context(), r.PathValue("org"), r.PathValue("slug"))
		return admin.Page[admin.KeyView]{Data: p.Keys}, err
	})
}

func (h *Handler) addProviderKey(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.KeyInput) (any, error) {
		return h.svc.AddProviderKey(r.Context(), r.PathValue("org"), r.PathValue("slug"), in)
	})
}

func (h *Handler) patchProviderKey(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.KeyWeightInput) (any, error) {
		return h.svc.SetProviderKeyWeight(r.Context(), r.PathValue("org"), r.PathValue("slug"), r.PathValue("id"), in)
	})
}

func (h *Handler) deleteProviderKey(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, h.svc.DeleteProviderKey(r.Context(), r.PathValue("org"), r.PathValue("slug"), r.PathValue("id")))
}

func (h *Handler) checkSlug(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.SlugCheck, error) {
		return h.svc.CheckSlug(r.Context(), r.PathValue("org"), r.PathValue("slug"))
	})
}
