package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestEnvAdminToken: ROLTER_ADMIN_TOKEN is valid exactly while a start sets
// it. A changed value invalidates the old one at that start, an unset one
// invalidates it too, and setting it again brings it back; tokens created
// through the API are not touched.
func TestEnvAdminToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		spec, dir := storetest.Spec(t, d)
		const envTok, envTok2 = "my-operator-token-FAKE-0005", "rotated-token-FAKE-0006-padded"
		cfg := server.Config{Store: spec, DataDir: dir}

		cfg.AdminToken = secret.New(envTok)
		r := start(t, cfg)
		if strings.Contains(r.out.String(), "ra-") || strings.Contains(r.out.String(), envTok) {
			t.Fatalf("banner with ROLTER_ADMIN_TOKEN: %q", r.out.String())
		}
		if code, _ := r.call(t, "GET", "/admin/v1/orgs", envTok, ""); code != 200 {
			t.Fatalf("env token refused: %d", code)
		}
		if code, _ := r.call(t, "GET", "/admin/v1/orgs", "wrong", ""); code != 401 {
			t.Fatalf("wrong token: %d", code)
		}
		// The env token is listed, and not revocable through the API.
		code, body := r.call(t, "GET", "/admin/v1/tokens", envTok, "")
		if code != 200 || !strings.Contains(body, `"source":"env"`) || strings.Contains(body, envTok) {
			t.Fatalf("token list: %d %s", code, body)
		}
		if code, body := r.call(t, "DELETE", "/admin/v1/tokens/1", envTok, ""); code != 409 || !strings.Contains(body, "bootstrap_token") {
			t.Fatalf("revoke env token: %d %s", code, body)
		}
		code, body = r.call(t, "POST", "/admin/v1/tokens", envTok, `{"name":"ops","scope":"global"}`)
		if code != 201 {
			t.Fatalf("create token: %d %s", code, body)
		}
		var ops struct{ Secret string }
		_ = json.Unmarshal([]byte(body), &ops)
		_ = r.srv.Shutdown()

		// A changed value: the old one stops working at this start.
		cfg.AdminToken = secret.New(envTok2)
		r = start(t, cfg)
		for tok, want := range map[string]int{envTok: 401, envTok2: 200, ops.Secret: 200} {
			if code, _ := r.call(t, "GET", "/admin/v1/orgs", tok, ""); code != want {
				t.Fatalf("after rotation: token %.6s... got %d, want %d", tok, code, want)
			}
		}
		if r.out.String() != "" || strings.Contains(r.logs.String(), envTok2) {
			t.Fatal("second start printed or logged the token")
		}
		_ = r.srv.Shutdown()

		// Unset: no env token is valid.
		cfg.AdminToken = secret.Secret{}
		r = start(t, cfg)
		for tok, want := range map[string]int{envTok: 401, envTok2: 401, ops.Secret: 200} {
			if code, _ := r.call(t, "GET", "/admin/v1/orgs", tok, ""); code != want {
				t.Fatalf("unset: token %.6s... got %d, want %d", tok, code, want)
			}
		}
		if r.out.String() != "" {
			t.Fatalf("a later start without ROLTER_ADMIN_TOKEN minted: %q", r.out.String())
		}
		_ = r.srv.Shutdown()

		// Set again: valid again, while it is set.
		cfg.AdminToken = secret.New(envTok)
		r = start(t, cfg)
		defer r.srv.Shutdown()
		if code, _ := r.call(t, "GET", "/admin/v1/orgs", envTok, ""); code != 200 {
			t.Fatalf("env token set again: %d", code)
		}
	})
}

// TestShortAdminTokenStopsStart: a ROLTER_ADMIN_TOKEN under 24 characters
// stops the start before the store is opened, and the error names the rule
// but not the value.
func TestShortAdminTokenStopsStart(t *testing.T) {
	const short = "tok-FAKE-23-characters!"
	if len(short) != 23 {
		t.Fatal(len(short))
	}
	dir := t.TempDir()
	_, err := server.Start(context.Background(), server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminToken: secret.New(short)},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "ROLTER_ADMIN_TOKEN") || !strings.Contains(err.Error(), "24") || strings.Contains(err.Error(), short) {
		t.Fatalf("short token: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rolter.db")); !os.IsNotExist(err) {
		t.Fatalf("the store was created: %v", err)
	}
	// 24 characters start.
	r := start(t, server.Config{DataDir: dir, AdminToken: secret.New(short + "x")})
	_ = r.srv.Shutdown()
}

// TestFirstStartTokenRevocable: without ROLTER_ADMIN_TOKEN the generated
// token (long enough for the rule) is an ordinary global token: once
// another global token exists it can be revoked, and it stops at once.
func TestFirstStartTokenRevocable(t *testing.T) {
	r := start(t, server.Config{DataDir: t.TempDir()})
	defer r.srv.Shutdown()
	first := adminRe.FindStringSubmatch(r.out.String())[1]
	if len(first) < server.MinAdminTokenLen {
		t.Fatalf("generated token has %d characters", len(first))
	}
	code, body := r.call(t, "GET", "/admin/v1/tokens", first, "")
	if code != 200 || !strings.Contains(body, `"source":"first_start"`) || !strings.Contains(body, `"prefix":"`+first[:15]+`"`) {
		t.Fatalf("tokens: %d %s", code, body)
	}
	if code, body := r.call(t, "DELETE", "/admin/v1/tokens/1", first, ""); code != 409 || !strings.Contains(body, "last_admin_token") {
		t.Fatalf("revoke the only token: %d %s", code, body)
	}
	_, body = r.call(t, "POST", "/admin/v1/tokens", first, `{"name":"ops","scope":"global"}`)
	var ops struct{ Secret string }
	_ = json.Unmarshal([]byte(body), &ops)
	if code, body := r.call(t, "DELETE", "/admin/v1/tokens/1", ops.Secret, ""); code != 200 {
		t.Fatalf("revoke first-start token: %d %s", code, body)
	}
	if code, _ := r.call(t, "GET", "/admin/v1/orgs", first, ""); code != 401 {
		t.Fatalf("revoked first-start token: %d", code)
	}
}

// TestAdminTokensAndKeyEditsEndToEnd runs the section's operator story on
// a running gateway, on both stores: an org token manages its org and sees
// nothing else; a key's allowlist is widened with PATCH and the data path
// honours it on the next request, with the same secret; a project whose
// key served traffic is emptied (revoke, purge) and deleted, and its usage
// stays.
func TestAdminTokensAndKeyEditsEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		spec, dir := storetest.Spec(t, d)
		const admin = "ra-e2e-tokens-FAKE-0123456789"
		r := start(t, server.Config{Store: spec, DataDir: dir, Demo: true, AdminToken: secret.New(admin)})
		defer r.srv.Shutdown()
		must := func(method, path, tok, body string, want int) string {
			t.Helper()
			code, out := r.call(t, method, path, tok, body)
			if code != want {
				t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
			}
			return out
		}
		chat := func(key, model string) (int, string) {
			return r.call(t, "POST", "/v1/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		}

		// An org token for org "team".
		must("POST", "/admin/v1/orgs", admin, `{"name":"team"}`, 201)
		teamTok := decodeJSON[struct{ Secret string }](t, must("POST", "/admin/v1/tokens", admin,
			`{"name":"team-admin","scope":{"org":"team"}}`, 201)).Secret
		must("POST", "/admin/v1/orgs/team/projects", teamTok, `{"name":"default"}`, 201)
		must("POST", "/admin/v1/orgs/team/providers", teamTok,
			`{"name":"team-vllm","kind":"vllm","base_url":"http://127.0.0.1:1/v1"}`, 201)
		if body := must("GET", "/admin/v1/orgs", teamTok, "", 200); strings.Contains(body, `"default"`) || !strings.Contains(body, `"team"`) {
			t.Fatalf("org list for the team token: %s", body)
		}
		for _, c := range [][3]string{
			{"GET", "/admin/v1/orgs/default/providers", ""},
			{"GET", "/admin/v1/orgs/default/projects/default/keys", ""},
			{"DELETE", "/admin/v1/orgs/default/providers/demo", ""},
			{"POST", "/admin/v1/orgs", `{"name":"mine"}`},
			{"GET", "/admin/v1/tokens", ""},
		} {
			if code, body := r.call(t, c[0], c[1], teamTok, c[2]); code != 404 {
				t.Fatalf("%s %s with the team token: %d %s", c[0], c[1], code, body)
			}
		}
		if code, _ := r.call(t, "GET", "/admin/v1/orgs/default/providers/demo", admin, ""); code != 200 {
			t.Fatal("the refused delete changed the demo provider")
		}

		// PATCH widens an allowlist; the next request sees it.
		k := decodeJSON[struct {
			ID     int64
			Secret string
		}](t, must("POST", "/admin/v1/orgs/default/projects/default/keys", admin, `{"name":"alice","models":["other"]}`, 201))
		keyPath := "/admin/v1/orgs/default/projects/default/keys/" + jsonNum(k.ID)
		if code, body := chat(k.Secret, "demo"); code != 403 {
			t.Fatalf("before the edit: %d %s", code, body)
		}
		must("PATCH", keyPath, admin, `{"models":["other","demo"],"rpm_limit":100}`, 200)
		if code, body := chat(k.Secret, "demo"); code != 200 {
			t.Fatalf("after the edit: %d %s", code, body)
		}
		must("DELETE", keyPath, admin, "", 200)
		if code, _ := chat(k.Secret, "demo"); code != 401 {
			t.Fatalf("revoked key: %d", code)
		}
		must("PATCH", keyPath, admin, `{"name":"x"}`, 409)

		// A project whose key served traffic: revoke, purge, delete.
		must("POST", "/admin/v1/orgs/default/projects", admin, `{"name":"tmp"}`, 201)
		tk := decodeJSON[struct {
			ID     int64
			Secret string
		}](t, must("POST", "/admin/v1/orgs/default/projects/tmp/keys", admin, `{"name":"tmp-key"}`, 201))
		if code, body := chat(tk.Secret, "demo/demo-model"); code != 200 {
			t.Fatalf("tmp key: %d %s", code, body)
		}
		usage := "/admin/v1/orgs/default/usage?key=" + jsonNum(tk.ID)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(must("GET", usage, admin, "", 200), `"status":200`) {
			if time.Now().After(deadline) {
				t.Fatal("the tmp key's usage was never recorded")
			}
			time.Sleep(20 * time.Millisecond) // waiting for the usage writer, not a timing assertion
		}
		tkPath := "/admin/v1/orgs/default/projects/tmp/keys/" + jsonNum(tk.ID)
		must("DELETE", "/admin/v1/orgs/default/projects/tmp", admin, "", 409)
		must("DELETE", tkPath+"?purge=true", admin, "", 409)
		must("DELETE", tkPath, admin, "", 200)
		must("DELETE", tkPath+"?purge=true", admin, "", 204)
		must("DELETE", "/admin/v1/orgs/default/projects/tmp", admin, "", 204)
		if body := must("GET", usage, admin, "", 200); !strings.Contains(body, `"key_id":`+jsonNum(tk.ID)) {
			t.Fatalf("usage after the project went: %s", body)
		}
	})
}

// TestTokenRevocationReachesReplicas: a token revoked on one replica stops
// working on the other (PostgreSQL LISTEN/NOTIFY), without a restart.
func TestTokenRevocationReachesReplicas(t *testing.T) {
	spec, dir := storetest.Spec(t, "postgres")
	const admin = "ra-replicas-tokens-FAKE-0123456789"
	a := start(t, server.Config{Store: spec, DataDir: dir, AdminToken: secret.New(admin)})
	defer a.srv.Shutdown()
	b := start(t, server.Config{Store: spec, DataDir: t.TempDir(), AdminToken: secret.New(admin)})
	defer b.srv.Shutdown()
	_, body := a.call(t, "POST", "/admin/v1/tokens", admin, `{"name":"ops","scope":"global"}`)
	ops := decodeJSON[struct {
		ID     int64
		Secret string
	}](t, body)
	waitCode := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, _ := b.call(t, "GET", "/admin/v1/orgs", ops.Secret, "")
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica B answers %d, want %d", code, want)
			}
			time.Sleep(20 * time.Millisecond) // waiting for B's rebuild, not a timing assertion
		}
	}
	waitCode(200)
	revoked := time.Now()
	if code, body := a.call(t, "DELETE", "/admin/v1/tokens/"+jsonNum(ops.ID), admin, ""); code != 200 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	waitCode(401)
	t.Logf("replica B refused the revoked token %v after the DELETE was sent", time.Since(revoked))
}

func jsonNum(n int64) string { return strconv.FormatInt(n, 10) }
