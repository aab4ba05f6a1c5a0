package adminapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
)

func (h *Handler) listHosts(w http.ResponseWriter, r *http.Request) error {
	return list(w, r, func(pr admin.PageRequest) (admin.Page[admin.HostView], error) {
		return h.svc.ListHosts(r.Context(), r.PathValue("org"), pr)
	})
}

// maxHostEntryBody is what the list form of POST /orgs/{org}/hosts
// allows per host: 4,096 bytes of notes with each non-ASCII character
// written as a \u escape, as Python's json.dumps writes them (12 KiB at
// most), and the recipe, hf_token and the rest in the remaining 4 KiB.
const maxHostEntryBody = 16 << 10

// maxHostsBody bounds the body of POST /orgs/{org}/hosts in its list
// form: admin.MaxHostsPerCreate entries of maxHostEntryBody, 16,384,000
// bytes (about 15.6 MiB). The one-host form keeps maxBody.
const maxHostsBody = admin.MaxHostsPerCreate * maxHostEntryBody

// createHost creates one host ({...}, answered with the host) or a batch
// ({"hosts": [{...}, ...]}, answered {"hosts": [...]}, all or none). The
// body is read once, up to the list form's bound, and decoded from what
// was read under the bound of the form it holds.
func (h *Handler) createHost(w http.ResponseWriter, r *http.Request) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHostsBody))
	if err != nil {
		return decodeError(err, maxHostsBody)
	}
	batch, err := hostsBatch(raw)
	if err != nil {
		return err
	}
	if batch {
		var in admin.HostsInput
		if err := decodeFrom(bytes.NewReader(raw), &in, maxHostsBody); err != nil {
			return err
		}
		v, err := h.svc.CreateHosts(r.Context(), r.PathValue("org"), in)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, v)
		return nil
	}
	if len(raw) > maxBody {
		return decodeError(&http.MaxBytesError{Limit: maxBody}, maxBody)
	}
	var in admin.HostInput
	if err := decodeFrom(bytes.NewReader(raw), &in, maxBody); err != nil {
		return err
	}
	v, err := h.svc.CreateHost(r.Context(), r.PathValue("org"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// hostsBatch reports whether raw is the list form of a host create: an
// object whose first key is "hosts" (matched as the decoder matches keys,
// ignoring case). A list of more than admin.MaxHostsPerCreate entries is
// refused (too_many_entries) before anything is decoded, counting the
// entries token by token and stopping at the first over the cap. JSON it
// cannot read is left to the decoder to refuse.
func hostsBatch(raw []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, nil
	}
	key, err := dec.Token()
	if k, ok := key.(string); err != nil || !ok || !strings.EqualFold(k, "hosts") {
		return false, nil
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return true, nil
	}
	n, depth := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return true, nil
		}
		d, delim := tok.(json.Delim)
		if delim && (d == ']' || d == '}') {
			if depth == 0 {
				return true, nil // the end of the list
			}
			depth--
			continue
		}
		if depth == 0 {
			if n++; n > admin.MaxHostsPerCreate {
				return true, admin.TooManyHosts("more than " + strconv.Itoa(admin.MaxHostsPerCreate))
			}
		}
		if delim {
			depth++
		}
	}
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
