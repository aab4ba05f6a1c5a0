package secret

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The master key (ROLTER_MASTER_KEY) comes in one of two forms:
//
//   - A key: 32 random bytes written as 64 hex digits or as base64 (the
//     standard or the URL alphabet, with or without "=" padding). GenerateKey
//     (rolter keygen) prints one. The sealing key is HKDF-SHA256 of the key's
//     text, info "rolter provider secrets v1": the derivation rolter has
//     always used, so stores sealed under a key of this form read on.
//   - "passphrase:" followed by at least MinPassphrase characters. The
//     sealing key is argon2id of the passphrase (passphrase.go) with a random
//     salt; the parameters and the salt are stored beside each ciphertext.
//
// Anything else (hunter2, a 20-character string, 32 bytes of zeros) is
// refused with the reason: a short or guessable key protects nothing.

// KeyBytes is how many random bytes a master key holds.
const KeyBytes = 32

// PassphrasePrefix marks a passphrase master key.
const PassphrasePrefix = "passphrase:"

// MinPassphrase is the shortest passphrase accepted, in characters.
const MinPassphrase = 16

// GenerateKey returns a fresh master key: 32 bytes from crypto/rand in
// base64 (standard alphabet, padded), 44 characters.
func GenerateKey() Secret {
	b := make([]byte, KeyBytes)
	if _, err := rand.Read(b); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	return New(base64.StdEncoding.EncodeToString(b))
}

// masterKind is what a master key's text is.
type masterKind int

const (
	masterRaw        masterKind = iota // 32 random bytes, hex or base64
	masterPassphrase                   // passphrase:…
)

// checkMaster classifies a non-empty master key and refuses a weak one.
// Its errors say why and never quote the key.
func checkMaster(text string) (masterKind, string, error) {
	if p, ok := strings.CutPrefix(text, PassphrasePrefix); ok {
		n := utf8.RuneCountInString(p)
		if n < MinPassphrase {
			return 0, "", fmt.Errorf("secret: the passphrase is %d characters; at least %d are required", n, MinPassphrase)
		}
		if distinctRunes(p) < 6 {
			return 0, "", errors.New("secret: the passphrase repeats too few characters to be guessable only with effort")
		}
		return masterPassphrase, p, nil
	}
	b, ok := decodeKey(text)
	if !ok {
		return 0, "", fmt.Errorf("secret: the master key (%d characters) is neither %d random bytes in hex (64 digits) or base64 (43 or 44 characters) nor %q followed by at least %d characters; run rolter keygen for a key",
			utf8.RuneCountInString(text), KeyBytes, PassphrasePrefix, MinPassphrase)
	}
	// 32 bytes from a random source take ~30 distinct values; fewer than
	// 16 happens by chance with probability far below 2^-64. A key like
	// 64 zeros or "abab…" is typed, not generated.
	if distinctBytes(b) < 16 {
		return 0, "", errors.New("secret: the master key decodes to 32 bytes that are not random (too many repeats); run rolter keygen for a key")
	}
	return masterRaw, text, nil
}

// decodeKey decodes 32 bytes from hex or base64 text.
func decodeKey(text string) ([]byte, bool) {
	if len(text) == 2*KeyBytes {
		if b, err := hex.DecodeString(text); err == nil {
			return b, true
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(text); err == nil && len(b) == KeyBytes {
			return b, true
		}
	}
	return nil, false
}

func distinctBytes(b []byte) int {
	var seen [256]bool
	n := 0
	for _, c := range b {
		if !seen[c] {
			seen[c], n = true, n+1
		}
	}
	return n
}

func distinctRunes(s string) int {
	seen := map[rune]bool{}
	for _, r := range s {
		seen[r] = true
	}
	return len(seen)
}
