package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const plain = "sk-live-FAKE-1234567890"
	s := New(plain)
	type wrapper struct {
		Key Secret `json:"key"`
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "key", s, "w", wrapper{s})
	j, _ := json.Marshal(wrapper{s})
	outs := []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s),
		fmt.Sprintf("%+v", wrapper{s}), string(j), logs.String(),
	}
	for _, o := range outs {
		if strings.Contains(o, plain) {
			t.Fatalf("secret leaked in %q", o)
		}
	}
	if s.Reveal() != plain {
		t.Fatal("Reveal lost the value")
	}
	var back wrapper
	if err := json.Unmarshal([]byte(`{"key":"`+plain+`"}`), &back); err != nil || back.Key.Reveal() != plain {
		t.Fatalf("unmarshal: %v %v", err, back.Key.Reveal() == plain)
	}
	if err := json.Unmarshal([]byte(`{"key":12345}`), &back); err == nil || strings.Contains(err.Error(), "12345") {
		t.Fatalf("non-string secret: err %v", err)
	}
}

func TestMintAndLookup(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok, id := Mint(PrefixVirtualKey)
		got, ok := Lookup(PrefixVirtualKey, tok.Reveal())
		if !ok || got != id || seen[id] {
			t.Fatalf("lookup %q -> %q %v (dup %v)", tok.Reveal(), got, ok, seen[id])
		}
		seen[id] = true
		if _, ok := Lookup(PrefixAdminToken, tok.Reveal()); ok {
			t.Fatal("lookup accepted the wrong prefix")
		}
	}
	for _, bad := range []string{"", "rk-", "rk-short", "rk-abcdefghijklXrest", "sk-abcdefghijkl_rest"} {
		if _, ok := Lookup(PrefixVirtualKey, bad); ok {
			t.Errorf("Lookup(%q) accepted", bad)
		}
	}
}

func TestHash(t *testing.T) {
	h := HashOf("a")
	back, err := ParseHash(h.Hex())
	if err != nil || !back.Equal(h) || back.Equal(HashOf("b")) {
		t.Fatalf("hash roundtrip: %v", err)
	}
	if _, err := ParseHash("zz"); err == nil {
		t.Fatal("bad hash accepted")
	}
}

func TestSeal(t *testing.T) {
	const plain = "sk-upstream-FAKE"
	on, _ := NewSealer(New(testKey1))
	off, _ := NewSealer(Secret{})
	other, _ := NewSealer(New(testKey2))

	stored := on.Seal(New(plain))
	if strings.Contains(stored, plain) || !strings.HasPrefix(stored, sealedPrefix) {
		t.Fatalf("sealed value shows plaintext: %q", stored)
	}
	if got, err := on.Open(stored); err != nil || got.Reveal() != plain {
		t.Fatalf("open: %v", err)
	}
	if _, err := off.Open(stored); err != ErrNoMasterKey {
		t.Fatalf("open without key: %v", err)
	}
	if _, err := other.Open(stored); err != ErrWrongMasterKey {
		t.Fatalf("open with wrong key: %v", err)
	}
	// Rows written before a master key was set stay readable.
	if got, err := on.Open(off.Seal(New(plain))); err != nil || got.Reveal() != plain {
		t.Fatalf("open plain row: %v", err)
	}
	if _, err := on.Open("garbage"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

// TestScenario33_BearerSchemeIsCaseInsensitive: RFC 7235 auth schemes are
// case-insensitive; the token itself is not.
func TestScenario33_BearerSchemeIsCaseInsensitive(t *testing.T) {
	for _, c := range []struct {
		in, tok string
		ok      bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"bEaReR  abc ", "abc", true},
		{"Bearer AbC", "AbC", true},
		{"Basic abc", "", false},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Bearerabc", "", false},
		{"", "", false},
	} {
		tok, ok := Bearer(c.in)
		if tok != c.tok || ok != c.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", c.in, tok, ok, c.tok, c.ok)
		}
	}
}
