package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/rolter/rolter/internal/store"
)

// Stable error codes of the admin API. Clients branch on these, never on
// messages.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeUnknownField         = "unknown_field"
	CodeValidation           = "validation_failed"
	CodeUnauthorized         = "unauthorized"
	CodeNotFound             = "not_found"
	CodeConflict             = "conflict"
	CodeSlugTaken            = "slug_taken"
	CodeSlugImmutable        = "slug_immutable"
	CodeInUse                = "in_use"
	CodeUnknownProvider      = "unknown_provider"
	CodeBodyTooLarge         = "body_too_large"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeStoreUnavailable     = "store_unavailable"
	CodeInternal             = "internal_error"
)

// Error is an admin API failure. Message and Fields go to the client; Err
// is logged only, so driver details and anything secret-adjacent stay in
// the server (the client message never quotes input values).
type Error struct {
	Status     int               `json:"-"`
	Code       string            `json:"code"`
	Message    string            `json:"message"`
	Fields     map[string]string `json:"fields,omitempty"`
	Suggestion string            `json:"suggestion,omitempty"`
	Err        error             `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// fieldErrors collects validation failures by JSON field path.
type fieldErrors map[string]string

func (f fieldErrors) add(field, format string, args ...any) {
	if _, ok := f[field]; !ok {
		f[field] = fmt.Sprintf(format, args...)
	}
}

// err returns nil when nothing was added.
func (f fieldErrors) err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeValidation, Message: "the request has invalid fields; see fields", Fields: f}
}

// fromStore maps store errors to API errors; what names the resource.
func fromStore(err error, what string) error {
	var (
		ce *store.ConflictError
		in *store.InUseError
		ae *Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case errors.Is(err, store.ErrNotFound):
		return notFound("%s not found", what)
	case errors.As(err, &ce):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf("%s already exists", ce.What), Err: err}
	case errors.As(err, &in):
		return &Error{Status: http.StatusConflict, Code: CodeInUse, Message: fmt.Sprintf("%s is still in use by %s; remove those first", what, in.What), Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeStoreUnavailable, Message: "the store is unavailable; retry later", Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Err: err}
}

// writeError sends err in the one admin error shape:
// {"error":{"code":...,"message":...,"fields":{...},"suggestion":...}}.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *Error
	if !errors.As(err, &ae) {
		ae, _ = fromStore(err, "resource").(*Error)
	}
	if ae.Status >= 500 {
		h.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	} else if ae.Err != nil {
		h.log.Debug("admin request refused", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", ae.Err)
	}
	writeJSON(w, ae.Status, map[string]*Error{"error": ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
