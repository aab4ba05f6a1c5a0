// Package secret holds credentials so that they cannot leak by accident.
//
// A Secret prints, logs and marshals as "<secret>"; the plaintext is reachable
// only through Reveal, which makes every use greppable. The package also mints
// the gateway's own credentials (virtual keys, admin tokens), hashes them for
// storage, and seals upstream credentials at rest under the master key.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
)

// Redacted is what every printed form of a Secret shows.
const Redacted = "<secret>"

// Secret is a credential. Its zero value is the empty secret.
type Secret struct{ v string }

// New wraps a plaintext credential.
func New(plain string) Secret { return Secret{v: plain} }

// Reveal returns the plaintext. Call it only where the credential leaves the
// process on purpose: an upstream Authorization header, a create response.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

func (s Secret) String() string                         { return Redacted }
func (s Secret) GoString() string                       { return Redacted }
func (s Secret) Format(f fmt.State, _ rune)             { _, _ = f.Write([]byte(Redacted)) }
func (s Secret) LogValue() slog.Value                   { return slog.StringValue(Redacted) }
func (s Secret) MarshalJSON() ([]byte, error)           { return []byte(`"` + Redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)           { return []byte(Redacted), nil }
func (s *Secret) UnmarshalText(b []byte) error          { s.v = string(b); return nil }
func (s *Secret) UnmarshalJSON(b []byte) error          { return unmarshalJSONString(b, &s.v) }
func (s Secret) MarshalYAML() (any, error)              { return Redacted, nil }
func (s *Secret) UnmarshalYAML(f func(any) error) error { return f(&s.v) }

// Hash is the stored form of a gateway-issued credential: SHA-256 of the
// plaintext. The credentials it is used for carry at least 160 random bits,
// so a fast hash is enough; a slow KDF would only add latency per request.
type Hash [sha256.Size]byte

// HashOf hashes a plaintext credential.
func HashOf(plain string) Hash { return sha256.Sum256([]byte(plain)) }

// Equal compares two hashes in constant time.
func (h Hash) Equal(o Hash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }

// Hex is the storage encoding.
func (h Hash) Hex() string { return hex.EncodeToString(h[:]) }

// ParseHash decodes the storage encoding.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("secret: malformed hash")
	}
	copy(h[:], b)
	return h, nil
}

// Token prefixes name what a gateway-issued credential is for.
const (
	PrefixVirtualKey = "rk-"
	PrefixAdminToken = "ra-"
	PrefixFleetKey   = "rf-"
	PrefixHostKey    = "rh-"
)

// lookupLen is the length of the public lookup id inside a token.
const lookupLen = 12

// Mint creates a credential "<prefix><lookup>_<random>". The lookup part is
// public: it finds the stored row without a secret-dependent comparison, and
// the hash of the whole token is then compared in constant time.
func Mint(prefix string) (token Secret, lookup string) {
	lookup = randomString(9)[:lookupLen]
	return New(prefix + lookup + "_" + randomString(24)), lookup
}

// Lookup extracts the public lookup id from a token minted with prefix. It
// returns false for anything that does not have the minted shape.
func Lookup(prefix, token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok || len(rest) <= lookupLen+1 || rest[lookupLen] != '_' {
		return "", false
	}
	return rest[:lookupLen], true
}

func randomString(nbytes int) string {
	b := make([]byte, nbytes)
	if _, err := rand.Read(b); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	// URL-safe without padding; '_' and '-' may appear, which is fine because
	// Lookup splits at a fixed offset, not at the first '_'.
	return base64.RawURLEncoding.EncodeToString(b)
}

func unmarshalJSONString(b []byte, dst *string) error {
	if err := json.Unmarshal(b, dst); err != nil {
		// Never wrap the decoder's error: it may quote the input.
		return fmt.Errorf("secret: must be a JSON string")
	}
	return nil
}

// Bearer returns the token of an "Authorization: Bearer <token>" header
// value. The scheme is matched case-insensitively (RFC 7235 §2.1), and the
// token is trimmed; ok is false for another scheme or an empty token.
func Bearer(header string) (token string, ok bool) {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(header[len(scheme):])
	return token, token != ""
}
