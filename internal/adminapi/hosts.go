package adminapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listHosts(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.HostView], error) {
		return h.svc.ListHosts(r.Context(), r.PathValue("org"), pr)
	})
}

func (h *Handler) createHost(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.HostInput) (any, error) {
		return h.svc.CreateHost(r.Context(), r.PathValue("org"), in)
	})
}

func (h *Handler) getHost(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.HostView, error) {
		return h.svc.GetHost(r.Context(), r.PathValue("org"), r.PathValue("id"))
	})
}

func (h *Handler) patchHost(w http.ResponseWriter, r *http.Request) error {
	return update(w, r, func(in admin.HostPatch) (any, error) {
		return h.svc.PatchHost(r.Context(), r.PathValue("org"), r.PathValue("id"), in)
	})
}

// deleteHost retires: a host record is never deleted, so "did this host
// ever exist" keeps its answer (design 002).
func (h *Handler) deleteHost(w http.ResponseWriter, r *http.Request) error {
	return h.retireHost(w, r)
}

func (h *Handler) retireHost(w http.ResponseWriter, r *http.Request) error {
	return ok(w, r, func() (admin.HostView, error) {
		return h.svc.RetireHost(r.Context(), r.PathValue("org"), r.PathValue("id"))
	})
}

// applyHost restarts a host's box onto the current revision, draining it
// first. force (the query ?force=true, or a body {"force": true}) allows
// draining a pool's last serving host.
func (h *Handler) applyHost(w http.ResponseWriter, r *http.Request) error {
	force, err := applyForce(r)
	if err != nil {
		return err
	}
	return ok(w, r, func() (admin.HostView, error) {
		return h.svc.ApplyHost(r.Context(), r.PathValue("org"), r.PathValue("id"), force)
	})
}

// applyForce reads an apply's force from the query or the body; an empty
// body is no force.
func applyForce(r *http.Request) (bool, error) {
	bad := func(msg string) error {
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: msg, Fields: map[string]string{"force": msg}}
	}
	force := false
	if q := r.URL.Query().Get("force"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, bad("must be true or false")
		}
		force = v
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		return false, bad("the body could not be read")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return force, nil
	}
	var in struct {
		Force *bool `json:"force"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return false, bad(`the body must be {"force": true|false}`)
	}
	if in.Force != nil {
		force = force || *in.Force
	}
	return force, nil
}

func (h *Handler) listFleetKeys(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.FleetKeyView], error) {
		return h.svc.ListFleetKeys(r.Context(), r.PathValue("org"), pr)
	})
}

func (h *Handler) createFleetKey(w http.ResponseWriter, r *http.Request) error {
	return create(w, r, func(in admin.FleetKeyInput) (any, error) {
		return h.svc.CreateFleetKey(r.Context(), r.PathValue("org"), in)
	})
}

// revokeFleetKey revokes; the record stays with revoked_at.
func (h *Handler) revokeFleetKey(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, h.svc.RevokeFleetKey(r.Context(), r.PathValue("org"), r.PathValue("id")))
}
