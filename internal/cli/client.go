package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// APIPrefix is where the gateway serves the admin API.
const APIPrefix = "/admin/v1"

// maxResponse bounds what the client reads of one answer. A list page is
// at most 1000 rows; a usage summary at most 10000 groups.
const maxResponse = 64 << 20

// Client calls the admin API of one running gateway over HTTP. It never
// opens a store: everything it knows, it was told by the API, and every
// rule (validation, scopes, slugs) is the gateway's. It is safe for
// concurrent use.
type Client struct {
	base  url.URL // the gateway's root, e.g. http://127.0.0.1:4000
	token string
	http  *http.Client
	// pageSize is what List asks for per page (0: the API's most, 1000);
	// tests make it small to cross pages.
	pageSize int
}

// NewClient returns a client of the gateway at server (http or https, a
// path prefix allowed for a gateway behind a reverse proxy) that sends
// token as its admin bearer token. hc nil means http.DefaultClient.
func NewClient(server, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usageErrorf("--server %q: want the gateway's base URL, e.g. http://127.0.0.1:4000", server)
	}
	if u.User != nil {
		return nil, usageErrorf("--server: put no credentials in the URL; the admin token goes in ROLTER_ADMIN_TOKEN")
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: *u, token: token, http: hc}, nil
}

// APIError is an answer of the admin API other than 2xx, in its one error
// shape {"error":{"code","message","fields","suggestion"}}. Status is the
// HTTP status; Code is the stable reason to branch on.
type APIError struct {
	Status     int               `json:"-"`
	Code       string            `json:"code"`
	Message    string            `json:"message"`
	Fields     map[string]string `json:"fields,omitempty"`
	Suggestion string            `json:"suggestion,omitempty"`
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// ConnError is a gateway that could not be reached, or whose answer is not
// the admin API's (a proxy's error page, a truncated body).
type ConnError struct {
	Msg string
	Err error
}

func (e *ConnError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *ConnError) Unwrap() error { return e.Err }

// Do sends one request to the admin API: method, path under /admin/v1
// (already escaped, as the path builders return it), query and body, and
// decodes a 2xx answer's JSON into out. body nil sends none; a
// json.RawMessage or []byte is sent as is; anything else is marshalled.
// out nil discards the answer; a *json.RawMessage keeps it exactly as
// sent. A 204 leaves out untouched. Errors are *APIError (the API
// answered), *ConnError (it did not, or not as the API) or a context
// error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	b, err := c.DoRaw(ctx, method, path, query, body)
	if err != nil || out == nil || b == nil {
		return err
	}
	if raw, ok := out.(*json.RawMessage); ok {
		if !json.Valid(b) {
			return &ConnError{Msg: fmt.Sprintf("%s %s: the answer is not JSON", method, path)}
		}
		*raw = append((*raw)[:0], b...)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &ConnError{Msg: fmt.Sprintf("%s %s: unexpected answer", method, path), Err: err}
	}
	return nil
}

// DoRaw is Do returning a 2xx answer's body as it came (nil for a 204):
// the CSV form of the usage summary, or JSON for the caller to decode.
func (c *Client) DoRaw(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case json.RawMessage:
		rd = bytes.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode the request body: %w", err)
		}
		rd = bytes.NewReader(enc)
	}
	// path is escaped already (a route model may hold an escaped "/"), so
	// the URL is joined as text, not through url.URL's Path.
	target := strings.TrimRight(c.base.String(), "/") + APIPrefix + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, &ConnError{Msg: "build the request", Err: err}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnError{Msg: "cannot reach the gateway at " + c.base.String(), Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, &ConnError{Msg: fmt.Sprintf("%s %s: reading the answer", method, path), Err: err}
	}
	if len(b) > maxResponse {
		return nil, &ConnError{Msg: fmt.Sprintf("%s %s: the answer exceeds %d bytes", method, path, maxResponse)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, decodeError(resp.StatusCode, b)
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	return b, nil
}

// decodeError reads the admin error shape; an answer without it (a
// reverse proxy's 502 page) keeps its status, so it is classed the same.
func decodeError(status int, b []byte) error {
	var env struct {
		Error *APIError `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.Status = status
		return env.Error
	}
	return &APIError{Status: status, Message: fmt.Sprintf("the server answered %d %s without an admin API error (is --server the gateway?)",
		status, http.StatusText(status))}
}

// unwrapURLError drops *url.Error's "Get \"http://...\":" prefix: the
// message names the server already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
