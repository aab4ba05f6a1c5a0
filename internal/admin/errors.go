package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/rolter/rolter/internal/store"
)

// Stable error codes of the admin API. Clients branch on these, never on
// messages. Unauthorized, BodyTooLarge, MethodNotAllowed and
// UnsupportedMediaType are the HTTP layer's own (package adminapi); they
// are listed here so that the codes stay one list.
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
	CodeWriteConflict        = "write_conflict"
	CodeTooManyEntries       = "too_many_entries"
	CodeApplyInProgress      = "apply_in_progress"
	CodeApplyTimeout         = "apply_timeout"
	CodeCanceled             = "canceled"
	CodeTimeout              = "timeout"
	CodeInternal             = "internal_error"
)

// Classes of domain failure. Every error a Service method returns matches
// at most one of them with errors.Is (none: an internal failure); callers
// branch on the class, and on Error.Code for the finer, stable reason. The
// HTTP layer (package adminapi) maps the classes to statuses in one place.
var (
	// ErrInvalid: the input breaks a rule; Error.Fields names the fields.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound: what the call names does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the call conflicts with the current state (the name is
	// taken, the resource is still in use, the key is revoked, ...).
	ErrConflict = errors.New("conflict with the current state")
	// ErrUnavailable: the store cannot be reached, or the call ran out of
	// time or was canceled before it finished; retry later.
	ErrUnavailable = errors.New("store unavailable")
)

// AlreadyExists reports whether a create was refused because the name or
// slug is taken, the error an idempotent import skips.
func AlreadyExists(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Kind == ErrConflict && (ae.Code == CodeConflict || ae.Code == CodeSlugTaken)
}

// Error is an admin failure. Message and Fields go to the client; Err is
// logged only, so driver details and anything secret-adjacent stay in the
// server (the client message never quotes input values). Kind is its
// class, one of the Err* values above, or nil for an internal failure.
type Error struct {
	Kind       error             `json:"-"`
	Code       string            `json:"code"`
	Message    string            `json:"message"`
	Fields     map[string]string `json:"fields,omitempty"`
	Suggestion string            `json:"suggestion,omitempty"`
	// Keys are the virtual keys a purge refusal (CodeSlugInAllowlist)
	// names.
	Keys []AllowlistKey `json:"keys,omitempty"`
	Err  error          `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the error's class.
func (e *Error) Is(target error) bool { return e.Kind != nil && target == e.Kind }

func notFound(format string, args ...any) *Error {
	return &Error{Kind: ErrNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// fieldErrors collects validation failures by JSON field path.
type fieldErrors map[string]string

// maxFieldErrors bounds the fields one refusal names: a list of thousands
// of bad items is refused by its first hundred, not answered (and held)
// item by item.
const maxFieldErrors = 100

func (f fieldErrors) add(field, format string, args ...any) {
	if _, ok := f[field]; !ok && len(f) < maxFieldErrors {
		f[field] = fmt.Sprintf(format, args...)
	}
}

// err returns nil when nothing was added.
func (f fieldErrors) err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Kind: ErrInvalid, Code: CodeValidation, Message: "the request has invalid fields; see fields", Fields: f}
}

// Invalid is the ErrInvalid error (CodeValidation) that a Service method
// returns for bad fields, naming each with its problem; nil when fields is
// empty. It is for a layer over the Service that checks input of its own
// (query parameters, say) and must report it in the same shape.
func Invalid(fields map[string]string) error { return fieldErrors(fields).err() }

// AsError returns err as an *Error, for a layer that shows every failure in
// the one error shape: err itself when it is one, an apply's failure as
// its entry's error (ApplyError), else the domain error a
// store failure means (naming the resource generically), else an internal
// error that carries err. It returns nil for nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var ap *ApplyError
	if errors.As(err, &ap) {
		return ap.shaped()
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	ae, _ = fromStore(err, "resource").(*Error)
	return ae
}

// fromStore maps store errors to domain errors; what names the resource.
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
		return &Error{Kind: ErrConflict, Code: CodeConflict, Message: fmt.Sprintf("%s already exists", ce.What), Err: err}
	case errors.As(err, &in):
		return &Error{Kind: ErrConflict, Code: CodeInUse, Message: fmt.Sprintf("%s is still in use by %s; remove those first", what, in.What), Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Kind: ErrUnavailable, Code: CodeCanceled, Message: "the request was canceled before it finished", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: ErrUnavailable, Code: CodeTimeout, Message: "the request ran out of time before it finished; retry", Err: err}
	case errors.Is(err, store.ErrWriteConflict):
		return &Error{Kind: ErrConflict, Code: CodeWriteConflict,
			Message: "a concurrent write got in the way and this one was rolled back: nothing changed; retry", Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Error{Kind: ErrUnavailable, Code: CodeStoreUnavailable, Message: "the store is unavailable; retry later", Err: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}
