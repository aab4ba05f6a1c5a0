package admin

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// maxBody bounds admin request bodies; resources are small.
const maxBody = 1 << 20

// decode reads one JSON object into dst, refusing unknown fields, trailing
// data and oversized bodies. Errors name the field, never echo values.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return &Error{Kind: ErrInvalid, Code: CodeInvalidJSON, Message: "the body must hold exactly one JSON object"}
		}
		return nil
	}
	var (
		tooLarge *http.MaxBytesError
		typeErr  *json.UnmarshalTypeError
		syntax   *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &Error{Kind: errTooLarge, Code: CodeBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes", maxBody)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Kind: ErrInvalid, Code: CodeUnknownField, Message: fmt.Sprintf("unknown field %q", field),
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
		return &Error{Kind: ErrInvalid, Code: CodeValidation, Message: "a field has the wrong type; see fields",
			Fields: map[string]string{field: want}}
	case errors.As(err, &syntax):
		return &Error{Kind: ErrInvalid, Code: CodeInvalidJSON, Message: fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Kind: ErrInvalid, Code: CodeInvalidJSON, Message: "the body is empty or truncated; send a JSON object"}
	}
	// Custom unmarshalers (durations, secrets) return messages that never
	// quote secret input.
	return &Error{Kind: ErrInvalid, Code: CodeInvalidJSON, Message: strings.TrimPrefix(err.Error(), "json: ")}
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

// listPage is the pagination contract of every list: ?limit=N (1..1000,
// default 100) and ?cursor=C from the previous page's next_cursor.
type listPage[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

const (
	defaultLimit = 100
	maxLimit     = 1000
)

// pageOf parses the pagination query. It asks the store for one row more
// than the limit so that the response knows whether a next page exists.
func pageOf(r *http.Request) (store.Page, int, error) {
	fe := fieldErrors{}
	limit := defaultLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			fe.add("limit", "must be an integer from 1 to %d", maxLimit)
		}
		limit = n
	}
	var after int64
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fe.add("cursor", "is not a cursor this API returned")
		}
		after = n
	}
	if err := fe.err(); err != nil {
		return store.Page{}, 0, err
	}
	return store.Page{Limit: limit + 1, After: after}, limit, nil
}

// paginate trims rows to limit and sets the cursor from the last row's id.
func paginate[S, T any](rows []S, limit int, id func(S) int64, view func(S) T) listPage[T] {
	out := listPage[T]{Data: make([]T, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		out.NextCursor = strconv.FormatInt(id(rows[len(rows)-1]), 10)
	}
	for _, r := range rows {
		out.Data = append(out.Data, view(r))
	}
	return out
}

// listUnder answers one page of the rows under parent (an org's or a
// project's id), read by rows and shown by view: the shape of every list.
func listUnder[S, T any](w http.ResponseWriter, r *http.Request, what string, parent int64,
	rows func(context.Context, int64, store.Page) ([]S, error), id func(S) int64, view func(S) T) error {
	page, limit, err := pageOf(r)
	if err != nil {
		return err
	}
	got, err := rows(r.Context(), parent, page)
	if err != nil {
		return fromStore(err, what)
	}
	writeJSON(w, http.StatusOK, paginate(got, limit, id, view))
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
