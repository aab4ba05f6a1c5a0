package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// fleetFrom calls GET /vllm/config from the local address ip, so the
// gateway sees another box.
func (r *run) fleetFrom(t *testing.T, ip, key string) fleetapi.Config {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+fleetapi.ConfigPath, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/vllm/config from %s: %d %s", ip, resp.StatusCode, b)
	}
	testkit.AssertNoSecrets(t, "/vllm/config of "+ip, string(b), "hf_TOKEN-first-secret", "hf_TOKEN-rotated-secret")
	return decodeJSON[fleetapi.Config](t, string(b))
}

// An hf token is write-only: admin responses (create, patch, get, list,
// export) show only hf_token_set, logs never hold it, and only the box at
// the host's address receives it in /vllm/config. Rotating it makes a
// new revision; a host without one keeps the revision it had.
func TestFleetHFToken(t *testing.T) {
	r := start(t, fleetConfig("sqlite", t.TempDir()))
	defer r.srv.Shutdown()
	const (
		tok     = "tok-FLEET-FAKE-0123456789"
		secret1 = "hf_TOKEN-first-secret"
		secret2 = "hf_TOKEN-rotated-secret"
	)
	_, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"k"}`)
	fkey := decodeJSON[struct{ Secret string }](t, body).Secret
	var seen []string
	admin := func(method, path, in string, want int) string {
		t.Helper()
		code, body := r.call(t, method, path, tok, in)
		if code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, body)
		}
		testkit.AssertNoSecrets(t, method+" "+path, body, secret1, secret2)
		seen = append(seen, body)
		return body
	}
	recipe := fmt.Sprintf(recipeJSON, "")
	// A host without a token, at the same box, as the baseline revision.
	plain := decodeJSON[hostJSON](t, admin("POST", "/admin/v1/orgs/default/hosts",
		`{"ip":"127.0.0.1","port":1,"model_name":"plain","recipe":`+recipe+`}`, 201))
	body = admin("POST", "/admin/v1/orgs/default/hosts",
		`{"ip":"127.0.0.1","port":2,"model_name":"qwen3","hf_token":"`+secret1+`","recipe":`+recipe+`}`, 201)
	h := decodeJSON[hostJSON](t, body)
	if !strings.Contains(body, `"hf_token_set":true`) {
		t.Fatalf("create view: %s", body)
	}
	// Another box's host, at 127.0.0.2, with its own token.
	admin("POST", "/admin/v1/orgs/default/hosts",
		`{"ip":"127.0.0.2","port":3,"model_name":"other","hf_token":"hf_TOKEN-box-b-secret","recipe":`+recipe+`}`, 201)
	// A token on a source other than hf is refused and changes nothing.
	body = admin("POST", "/admin/v1/orgs/default/hosts",
		`{"ip":"127.0.0.1","port":4,"model_name":"u","hf_token":"`+secret2+`","recipe":{"vllm":{"model":"m","source":{"kind":"url","url":"https://example.invalid/m.tar"},"vram_gb":1,"disk_gb":1}}}`, 400)
	if !strings.Contains(body, "hf_token") {
		t.Fatalf("url source with a token: %s", body)
	}

	box := func() map[int64]fleetapi.Assignment {
		t.Helper()
		code, body := r.fleet(t, "GET", fleetapi.ConfigPath, fkey, "")
		if code != 200 {
			t.Fatalf("/vllm/config: %d %s", code, body)
		}
		testkit.AssertNoSecrets(t, "the box's /vllm/config", body, "hf_TOKEN-box-b-secret")
		out := map[int64]fleetapi.Assignment{}
		for _, a := range decodeJSON[fleetapi.Config](t, body).Assignments {
			out[a.HostID] = a
		}
		return out
	}
	as := box()
	if as[h.ID].HFToken != secret1 || as[plain.ID].HFToken != "" || len(as) != 2 {
		t.Fatalf("box assignments: %+v", as)
	}
	if as[h.ID].Revision != h.Revision || as[plain.ID].Revision != plain.Revision {
		t.Fatalf("revisions: config %s/%s, views %s/%s", as[h.ID].Revision, as[plain.ID].Revision, h.Revision, plain.Revision)
	}
	// A host without a token keeps the revision of the payload before
	// hf_token existed.
	if want := fleetapi.Revision(fleetapi.Assignment{HostID: plain.ID, ModelName: "plain", Port: 1, APIKey: plain.APIKey,
		Recipe: as[plain.ID].Recipe}); plain.Revision != want {
		t.Fatalf("token-less revision %s, want %s", plain.Revision, want)
	}
	// The other box sees only its own host and token.
	other := r.fleetFrom(t, "127.0.0.2", fkey)
	if len(other.Assignments) != 1 || other.Assignments[0].HFToken != "hf_TOKEN-box-b-secret" {
		t.Fatalf("other box: %+v", other)
	}
	for _, a := range other.Assignments {
		if a.HFToken == secret1 {
			t.Fatal("another box received the token")
		}
	}

	// Rotation: a new revision carrying the new token.
	path := fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", h.ID)
	body = admin("PATCH", path, `{"hf_token":"`+secret2+`"}`, 200)
	rotated := decodeJSON[hostJSON](t, body)
	if rotated.Revision == h.Revision || !strings.Contains(body, `"hf_token_set":true`) {
		t.Fatalf("rotation: %s", body)
	}
	if as = box(); as[h.ID].HFToken != secret2 || as[h.ID].Revision != rotated.Revision {
		t.Fatalf("after rotation: %+v", as[h.ID])
	}
	// A recipe patch keeps the token; a bad token is refused.
	admin("PATCH", path, `{"notes":"n"}`, 200)
	if as = box(); as[h.ID].HFToken != secret2 {
		t.Fatalf("patch dropped the token: %+v", as[h.ID])
	}
	admin("PATCH", path, `{"hf_token":"has space"}`, 400)
	admin("GET", path, "", 200)
	admin("GET", "/admin/v1/orgs/default/hosts", "", 200)
	admin("GET", "/admin/v1/export", "", 200)
	// Clearing: "" removes it.
	body = admin("PATCH", path, `{"hf_token":""}`, 200)
	if !strings.Contains(body, `"hf_token_set":false`) {
		t.Fatalf("cleared view: %s", body)
	}
	if as = box(); as[h.ID].HFToken != "" {
		t.Fatalf("after clearing: %+v", as[h.ID])
	}
	testkit.AssertNoSecrets(t, "gateway logs", r.logs.String(), secret1, secret2, "hf_TOKEN-box-b-secret")
	testkit.AssertNoSecrets(t, "gateway output", r.out.String(), secret1, secret2, "hf_TOKEN-box-b-secret")
}
