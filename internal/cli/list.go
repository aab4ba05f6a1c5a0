package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// maxPage is the largest page the API serves (?limit=1..1000).
const maxPage = 1000

// List reads the list at path page by page, following next_cursor, and
// returns at most max items (max >= 1) decoded as T, oldest first.
// truncated reports that more exist beyond max. It asks for one item more
// than it returns, so truncated is exact, never a guess from a full page.
// query holds the list's filters; limit and cursor are List's own.
func List[T any](ctx context.Context, c *Client, path string, query url.Values, max int) (items []T, truncated bool, err error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	page := maxPage
	if c.pageSize > 0 {
		page = c.pageSize
	}
	for {
		want := min(max-len(items)+1, page)
		q.Set("limit", strconv.Itoa(want))
		var resp struct {
			Data       []T    `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		if err := c.Do(ctx, http.MethodGet, path, q, nil, &resp); err != nil {
			return nil, false, err
		}
		items = append(items, resp.Data...)
		if len(items) > max {
			return items[:max], true, nil
		}
		if resp.NextCursor == "" || len(resp.Data) == 0 {
			return items, false, nil
		}
		q.Set("cursor", resp.NextCursor)
	}
}

// Get reads one resource at path as T (json.RawMessage keeps it as sent).
func Get[T any](ctx context.Context, c *Client, path string, query url.Values) (T, error) {
	var v T
	err := c.Do(ctx, http.MethodGet, path, query, nil, &v)
	return v, err
}

// Create POSTs body to path and returns the created resource as T.
func Create[T any](ctx context.Context, c *Client, path string, query url.Values, body any) (T, error) {
	var v T
	err := c.Do(ctx, http.MethodPost, path, query, body, &v)
	return v, err
}

// Update PATCHes body to path (only the fields present change) and
// returns the resource as it is now.
func Update[T any](ctx context.Context, c *Client, path string, query url.Values, body any) (T, error) {
	var v T
	err := c.Do(ctx, http.MethodPatch, path, query, body, &v)
	return v, err
}

// Delete sends DELETE to path. Most resources answer 204 (raw nil); a
// virtual key's revocation answers the revoked key.
func Delete(ctx context.Context, c *Client, path string, query url.Values) (raw json.RawMessage, err error) {
	err = c.Do(ctx, http.MethodDelete, path, query, nil, &raw)
	return raw, err
}
