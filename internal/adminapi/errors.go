package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rolter/rolter/internal/admin"
)

// Classes of HTTP-only failure, which no Service method returns. They are
// the Kind of an *admin.Error, as the domain classes are, so that every
// failure takes the one error shape and the one status table.
var (
	errUnauthenticated  = errors.New("unauthenticated")
	errMethod           = errors.New("method not allowed")
	errTooLarge         = errors.New("body too large")
	errUnsupportedMedia = errors.New("unsupported media type")
)

// noEndpoint is the 404 of a path the API does not serve, or does not
// serve to the caller's token.
func noEndpoint(r *http.Request) error {
	return &admin.Error{Kind: admin.ErrNotFound, Code: admin.CodeNotFound, Message: "no admin endpoint at " + r.URL.Path}
}

// writeError sends err in the one admin error shape:
// {"error":{"code":...,"message":...,"fields":{...},"suggestion":...}}.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := admin.AsError(err)
	status := httpStatus(ae.Kind)
	switch {
	case errors.Is(ae, context.Canceled) || errors.Is(ae, context.DeadlineExceeded):
		// The caller left, or the work ran out of its time: no fault of
		// the server's to page anyone for.
		h.log.Warn("admin request stopped before it finished", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	case status >= 500:
		h.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	case ae.Err != nil:
		h.log.Debug("admin request refused", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	}
	writeJSON(w, status, map[string]*admin.Error{"error": ae})
}

// httpStatus is the one mapping from failure classes to HTTP statuses.
func httpStatus(kind error) int {
	switch kind {
	case admin.ErrInvalid:
		return http.StatusBadRequest
	case admin.ErrNotFound:
		return http.StatusNotFound
	case admin.ErrConflict:
		return http.StatusConflict
	case admin.ErrUnavailable:
		return http.StatusServiceUnavailable
	case errUnauthenticated:
		return http.StatusUnauthorized
	case errMethod:
		return http.StatusMethodNotAllowed
	case errTooLarge:
		return http.StatusRequestEntityTooLarge
	case errUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
