package adminapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// maxBody bounds admin request bodies; resources are small.
const maxBody = 1 << 20

// decode reads one JSON object into dst, refusing unknown fields, trailing
// data and oversized bodies. Errors name the field, never echo values.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeUpTo(w, r, dst, maxBody)
}

// decodeUpTo is decode with a bound of its own, for the one body that
// carries a whole configuration (POST /apply).
func decodeUpTo(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	return decodeChecked(w, r, dst, limit, nil)
}

// decodeChecked is decodeUpTo that first reads the whole body and runs
// check on it, when check is not nil: what a body would cost to decode
// is refused before it is decoded.
func decodeChecked(w http.ResponseWriter, r *http.Request, dst any, limit int64, check func([]byte) error) error {
	var body io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if check != nil {
		raw, err := io.ReadAll(body)
		if err != nil {
			return decodeError(err, limit)
		}
		if err := check(raw); err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	return decodeFrom(body, dst, limit)
}

// decodeFrom is decode's reading of body, a reader bounded by limit or a
// body already read whole.
func decodeFrom(body io.Reader, dst any, limit int64) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeInvalidJSON, Message: "the body must hold exactly one JSON object"}
		}
		return nil
	}
	return decodeError(err, limit)
}

// decodeError is the refusal of a body that failed to read or decode.
func decodeError(err error, limit int64) error {
	var (
		tooLarge *http.MaxBytesError
		typeErr  *json.UnmarshalTypeError
		syntax   *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &admin.Error{Kind: errTooLarge, Code: admin.CodeBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes", limit)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeUnknownField, Message: fmt.Sprintf("unknown field %q", field),
			Fields: map[string]string{field: "unknown field"}}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		want := "must be " + jsonKind(typeErr.Type.Kind().String())
		if reflect.PointerTo(typeErr.Type).Implements(textUnmarshaler) {
			// Durations and secrets are written as strings whatever their
			// Go kind.
			want = "must be a string"
			if typeErr.Type == reflect.TypeOf(store.Duration(0)) {
				want = `must be a duration string such as "30s"`
			}
		}
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeValidation, Message: "a field has the wrong type; see fields",
			Fields: map[string]string{field: want}}
	case errors.As(err, &syntax):
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeInvalidJSON, Message: fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeInvalidJSON, Message: "the body is empty or truncated; send a JSON object"}
	}
	// Custom unmarshalers (durations, secrets) return messages that never
	// quote secret input.
	return &admin.Error{Kind: admin.ErrInvalid, Code: admin.CodeInvalidJSON, Message: strings.TrimPrefix(err.Error(), "json: ")}
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "int32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "of another type"
}

// pageOf reads the pagination query, ?limit=N (1..1000, default 100) and
// ?cursor=C from the previous page's next_cursor; the Service checks the
// values.
func pageOf(r *http.Request) (admin.PageRequest, error) {
	q := r.URL.Query()
	pr := admin.PageRequest{Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return pr, admin.Invalid(map[string]string{"limit": admin.LimitRule})
		}
		pr.Limit = n
	}
	return pr, nil
}

// boolQuery reads an optional true/false query parameter (absent: false).
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, admin.Invalid(map[string]string{name: "must be true or false"})
	}
	return b, nil
}

// list answers one page of a list read by fn.
func list[T any](w http.ResponseWriter, r *http.Request, fn func(admin.PageRequest) (admin.Page[T], error)) error {
	pr, err := pageOf(r)
	if err != nil {
		return err
	}
	return ok(w, r, func() (admin.Page[T], error) { return fn(pr) })
}

// ok answers 200 with fn's view, or fn's error.
func ok[T any](w http.ResponseWriter, _ *http.Request, fn func() (T, error)) error {
	v, err := fn()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// create decodes the body into an In, runs fn with it and answers 201 with
// fn's view: the shape of every POST that creates a resource.
func create[In any](w http.ResponseWriter, r *http.Request, fn func(In) (any, error)) error {
	return call(w, r, http.StatusCreated, fn)
}

// update is create for a PATCH: it answers 200.
func update[In any](w http.ResponseWriter, r *http.Request, fn func(In) (any, error)) error {
	return call(w, r, http.StatusOK, fn)
}

func call[In any](w http.ResponseWriter, r *http.Request, status int, fn func(In) (any, error)) error {
	var in In
	if err := decode(w, r, &in); err != nil {
		return err
	}
	v, err := fn(in)
	if err != nil {
		return err
	}
	writeJSON(w, status, v)
	return nil
}

// noContent answers 204 for a write that returns nothing, or err.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
