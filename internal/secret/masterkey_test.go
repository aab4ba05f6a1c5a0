package secret

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// Test master keys: 32 random bytes each.
const (
	testKey1 = "0a78d599f4afd91bc1d17a7ce3f4d0b57bf3fabf6bc6149234769046c6819794"
	testKey2 = "08471960c6b290f3afd2d336659634652016ee5759931766236c35792fcafe31"
)

// Issue 22, master key format: 32 random bytes (hex or base64) or a
// passphrase through a documented KDF; weak values are refused at start
// with the reason, and the reason never quotes the key.
func TestMasterKeyFormats(t *testing.T) {
	raw, _ := hex.DecodeString(testKey1)
	for _, ok := range []string{
		testKey1,
		strings.ToUpper(testKey2),
		base64.StdEncoding.EncodeToString(raw),
		base64.RawStdEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw),
		GenerateKey().Reveal(),
		"passphrase:correct horse battery staple",
	} {
		if _, err := NewSealer(New(ok)); err != nil {
			t.Errorf("%.12s…: refused: %v", ok, err)
		}
	}
	for key, why := range map[string]string{
		"hunter2":                            "neither 32 random bytes",
		"master-key-hygiene-FAKE-0123456789": "neither 32 random bytes",
		strings.Repeat("0", 64):              "not random",
		strings.Repeat("ab", 32):             "not random",
		testKey1[:62]:                        "neither 32 random bytes",
		testKey1 + "00":                      "neither 32 random bytes",
		"passphrase:hunter2":                 "at least 16",
		"passphrase:aaaaaaaaaaaaaaaaaaaaaa":  "too few characters",
	} {
		_, err := NewSealer(New(key))
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", key, err, why)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("%q: the error quotes the key: %v", key, err)
		}
	}
	if k := GenerateKey().Reveal(); len(k) != 44 || k == GenerateKey().Reveal() {
		t.Errorf("GenerateKey: %q", k)
	}
}

// Issue 22: a store sealed before the format check reads on with the same
// strong key. The value below was sealed by the earlier NewSealer (HKDF of
// the key's text) under this base64 key.
func TestMasterKeyCompatibleWithEarlierSeals(t *testing.T) {
	const (
		key    = "6n3GxYm0mJb7oO8l9bq7xv2Uu3zGZk1q3QH8S3r0pWc="
		stored = "enc:v1:ycU3NL90z1UV4CaqrfZrArgjJYdNuz501X9sbuuh9+Mzsf3XoMjw1c/HB6MOUtA2a2G7S+7hsvn2S07uhR2glMsY"
	)
	s, err := NewSealer(New(key))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Open(stored); err != nil || got.Reveal() != "sk-FAKE-sealed-before-the-format-check" {
		t.Fatalf("open an earlier seal: %q, %v", got.Reveal(), err)
	}
}

// Issue 22: a passphrase is stretched with argon2id, its parameters and
// salt stored beside the ciphertext and authenticated with it.
func TestPassphraseSeal(t *testing.T) {
	const plain = "sk-upstream-FAKE-pass"
	if defaultArgon != (argonParams{time: 3, memoryKiB: 64 << 10, threads: 4}) {
		t.Fatalf("defaults %v, want RFC 9106's second option as documented", defaultArgon)
	}
	// Values carry their parameters: cheap ones keep this test fast, and
	// opening proves they are read from the value, not assumed.
	defer func(p argonParams) { defaultArgon = p }(defaultArgon)
	defaultArgon = argonParams{time: 1, memoryKiB: 1024, threads: 1}
	a, err := NewSealer(New("passphrase:correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	stored := a.Seal(New(plain))
	if !strings.HasPrefix(stored, "enc:a2:t=1,m=1024,p=1:") || strings.Contains(stored, plain) {
		t.Fatalf("stored %q", stored)
	}
	// Another process (another salt) with the same passphrase opens it.
	b, _ := NewSealer(New("passphrase:correct horse battery staple"))
	if got, err := b.Open(stored); err != nil || got.Reveal() != plain {
		t.Fatalf("open with the same passphrase: %v", err)
	}
	if b.Seal(New(plain))[:40] == stored[:40] {
		t.Fatal("two sealers share a salt")
	}
	wrong, _ := NewSealer(New("passphrase:correct horse battery stapler"))
	if _, err := wrong.Open(stored); err != ErrWrongMasterKey {
		t.Fatalf("wrong passphrase: %v", err)
	}
	keyed, _ := NewSealer(New(testKey1))
	if _, err := keyed.Open(stored); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Fatalf("a key opening a passphrase seal: %v", err)
	}
	if _, err := a.Open(keyed.Seal(New(plain))); err == nil || !strings.Contains(err.Error(), "is a passphrase") {
		t.Fatalf("a passphrase opening a key seal: %v", err)
	}
	// Tampered parameters: out of bounds, or not what was sealed.
	for _, bad := range []string{
		strings.Replace(stored, "m=1024", "m=4194304", 1),
		strings.Replace(stored, "t=1", "t=2", 1),
		strings.Replace(stored, "t=1,", "t=01,", 1),
	} {
		if _, err := a.Open(bad); err == nil {
			t.Errorf("tampered %q opened", bad[:30])
		}
	}
}
