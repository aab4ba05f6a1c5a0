package cli

import (
	"errors"
	"fmt"
	"net/http"
)

// Exit codes of the resource commands, one per class of failure, so that
// a script can tell "fix the command" from "it is not there" from "retry
// later" without parsing messages. docs/cli.md lists them; the legacy
// commands (serve, import, ...) keep exiting 1 on any error.
const (
	ExitOK = 0
	// ExitFailure: anything the classes below do not cover.
	ExitFailure = 1
	// ExitUsage: the command is wrong. Bad flags or arguments, an unset
	// --key-env variable, an unreadable -f file, or the API refusing the
	// input (400: invalid_json, unknown_field, validation_failed, ...;
	// 405, 413). Both mean the same thing to the caller: change the
	// command, retrying it as is will fail again.
	ExitUsage = 2
	// ExitNotFound: the API answered 404 (an org-scoped token asking
	// outside its org gets this too).
	ExitNotFound = 3
	// ExitConflict: the API answered 409 (slug_taken, in_use, ...), or
	// `slugs check` found the slug taken.
	ExitConflict = 4
	// ExitAuth: no admin token, or the API answered 401 or 403.
	ExitAuth = 5
	// ExitServer: the gateway could not be reached, answered 5xx, or
	// answered something that is not the admin API. Retrying may help.
	ExitServer = 6
)

// UsageError is a mistake in the command line itself, found before any
// request is sent.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// exitCode maps an error to its exit code.
func exitCode(err error) int {
	var (
		ue *UsageError
		ae *APIError
		ce *ConnError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ae):
		return statusExit(ae.Status)
	case errors.As(err, &ce):
		return ExitServer
	case errors.Is(err, errNoToken):
		return ExitAuth
	case errors.Is(err, errSlugTaken):
		return ExitConflict
	}
	return ExitFailure
}

// statusExit is the one mapping from an API status to an exit code.
func statusExit(status int) int {
	switch {
	case status == http.StatusNotFound:
		return ExitNotFound
	case status == http.StatusConflict:
		return ExitConflict
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ExitAuth
	case status >= 500:
		return ExitServer
	case status >= 400:
		return ExitUsage
	}
	return ExitServer // a 1xx or 3xx is not an answer of the admin API
}
