package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// Sealed-value formats. A value written without a master key is kept as
// "plain:..." so that setting a master key later still reads old rows (they
// are re-sealed on their next write); a sealed value can never be read back
// without the key.
const (
	sealedPrefix = "enc:v1:"
	plainPrefix  = "plain:"
)

// ErrNoMasterKey is returned when a sealed value is read without a master key.
var ErrNoMasterKey = errors.New("secret: value is encrypted at rest but ROLTER_MASTER_KEY is not set")

// ErrWrongMasterKey is returned when a sealed value does not open.
var ErrWrongMasterKey = errors.New("secret: value does not decrypt with ROLTER_MASTER_KEY (wrong key?)")

// Sealer encrypts upstream credentials at rest with AES-256-GCM under a key
// derived from the master key (masterkey.go). The zero Sealer has no key
// and stores values as plain text.
type Sealer struct {
	aead cipher.AEAD     // a key master key: HKDF of its text
	pass *passphraseKeys // a passphrase master key: argon2id
}

// NewSealer derives the sealing key from master, refusing a master key in
// no accepted format or too weak, with the reason (masterkey.go). An empty
// master gives a Sealer that stores plain text.
func NewSealer(master Secret) (*Sealer, error) {
	if master.IsZero() {
		return &Sealer{}, nil
	}
	kind, text, err := checkMaster(master.Reveal())
	if err != nil {
		return nil, err
	}
	if kind == masterPassphrase {
		pk, err := newPassphraseKeys(text)
		if err != nil {
			return nil, err
		}
		return &Sealer{pass: pk}, nil
	}
	// The key's text, not its decoded bytes: the derivation sealed stores
	// were written with.
	key, err := hkdf.Key(sha256.New, []byte(text), nil, "rolter provider secrets v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Encrypting reports whether values are sealed.
func (s *Sealer) Encrypting() bool { return s != nil && (s.aead != nil || s.pass != nil) }

// Seal returns the storage form of v.
func (s *Sealer) Seal(v Secret) string {
	if !s.Encrypting() {
		return plainPrefix + v.Reveal()
	}
	if s.pass != nil {
		return s.pass.seal(v)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	ct := s.aead.Seal(nonce, nonce, []byte(v.Reveal()), []byte(sealedPrefix))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(ct)
}

// Open reverses Seal.
func (s *Sealer) Open(stored string) (Secret, error) {
	if v, ok := strings.CutPrefix(stored, plainPrefix); ok {
		return New(v), nil
	}
	if strings.HasPrefix(stored, argonPrefix) {
		if !s.Encrypting() {
			return Secret{}, ErrNoMasterKey
		}
		if s.pass == nil {
			return Secret{}, errors.New("secret: value was sealed under a passphrase master key (passphrase:…), and ROLTER_MASTER_KEY is a key")
		}
		return s.pass.open(stored)
	}
	b64, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return Secret{}, errors.New("secret: stored value has an unknown format")
	}
	if !s.Encrypting() {
		return Secret{}, ErrNoMasterKey
	}
	if s.aead == nil {
		return Secret{}, errors.New("secret: value was sealed under a key master key, and ROLTER_MASTER_KEY is a passphrase")
	}
	ct, err := base64.RawStdEncoding.DecodeString(b64)
	n := s.aead.NonceSize()
	if err != nil || len(ct) < n {
		return Secret{}, errors.New("secret: stored value is corrupt")
	}
	pt, err := s.aead.Open(nil, ct[:n], ct[n:], []byte(sealedPrefix))
	if err != nil {
		return Secret{}, ErrWrongMasterKey
	}
	return New(string(pt)), nil
}
