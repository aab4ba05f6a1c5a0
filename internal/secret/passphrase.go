package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// A passphrase master key is stretched with argon2id (RFC 9106), and the
// parameters travel with each value:
//
//	enc:a2:t=3,m=65536,p=4:<salt, base64>:<nonce||ciphertext, base64>
//
// t passes over m KiB of memory with p lanes; the salt is 16 random bytes
// drawn once per Sealer (once per process start), so every value a process
// seals shares one derivation. The header up to the last ':' is the AEAD's
// additional data: a changed parameter or salt does not open. Parameters
// are read from the stored value, so a later release may raise them without
// losing what was sealed before; they are bounded on read so that a
// tampered row cannot make a start allocate gigabytes.
const argonPrefix = "enc:a2:"

// argonParams are argon2id's cost parameters.
type argonParams struct {
	time, memoryKiB uint32
	threads         uint8
}

// defaultArgon is RFC 9106's second recommended option (64 MiB, 3 passes,
// 4 lanes), for hosts where 2 GiB per derivation is too much.
var defaultArgon = argonParams{time: 3, memoryKiB: 64 << 10, threads: 4}

// Bounds on parameters read from a stored value.
const (
	maxArgonTime   = 16
	maxArgonMemory = 1 << 20 // KiB: 1 GiB
	maxArgonLanes  = 64
	argonSaltBytes = 16
)

func (p argonParams) String() string {
	return fmt.Sprintf("t=%d,m=%d,p=%d", p.time, p.memoryKiB, p.threads)
}

func parseArgon(s string) (argonParams, error) {
	var p argonParams
	var lanes uint32
	// Sscanf stops at the format's end and takes leading zeros: printing
	// the values back must give s exactly.
	if n, err := fmt.Sscanf(s, "t=%d,m=%d,p=%d", &p.time, &p.memoryKiB, &lanes); n != 3 || err != nil || s != fmt.Sprintf("t=%d,m=%d,p=%d", p.time, p.memoryKiB, lanes) {
		return p, errors.New("secret: stored value is corrupt (argon2id parameters)")
	}
	if p.time < 1 || p.time > maxArgonTime || p.memoryKiB < 8*lanes || p.memoryKiB > maxArgonMemory || lanes < 1 || lanes > maxArgonLanes {
		return p, errors.New("secret: stored value has argon2id parameters out of bounds")
	}
	p.threads = uint8(lanes)
	return p, nil
}

// passphraseKeys seals under one fresh salt and opens under any salt,
// caching derivations: each costs tens of milliseconds and 64 MiB.
type passphraseKeys struct {
	pass   []byte
	params argonParams
	salt   []byte
	aead   cipher.AEAD // for params and salt

	mu    sync.Mutex
	cache map[string]cipher.AEAD // by "params:salt"
}

// maxCachedSalts bounds the derivations kept; a store holds one salt per
// process start that sealed a value.
const maxCachedSalts = 64

func newPassphraseKeys(pass string) (*passphraseKeys, error) {
	k := &passphraseKeys{pass: []byte(pass), params: defaultArgon, salt: make([]byte, argonSaltBytes), cache: map[string]cipher.AEAD{}}
	if _, err := rand.Read(k.salt); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	aead, err := k.derive(k.params, k.salt)
	if err != nil {
		return nil, err
	}
	k.aead = aead
	k.cache[k.header(k.params, k.salt)] = aead
	return k, nil
}

func (k *passphraseKeys) derive(p argonParams, salt []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(argon2.IDKey(k.pass, salt, p.time, p.memoryKiB, p.threads, 32))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (k *passphraseKeys) header(p argonParams, salt []byte) string {
	return argonPrefix + p.String() + ":" + base64.RawStdEncoding.EncodeToString(salt) + ":"
}

func (k *passphraseKeys) seal(v Secret) string {
	h := k.header(k.params, k.salt)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("secret: crypto/rand failed: " + err.Error())
	}
	return h + base64.RawStdEncoding.EncodeToString(k.aead.Seal(nonce, nonce, []byte(v.Reveal()), []byte(h)))
}

func (k *passphraseKeys) open(stored string) (Secret, error) {
	rest := strings.TrimPrefix(stored, argonPrefix)
	ps, rest, ok1 := strings.Cut(rest, ":")
	saltB64, ctB64, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return Secret{}, errors.New("secret: stored value is corrupt")
	}
	p, err := parseArgon(ps)
	if err != nil {
		return Secret{}, err
	}
	salt, err := base64.RawStdEncoding.DecodeString(saltB64)
	if err != nil || len(salt) != argonSaltBytes {
		return Secret{}, errors.New("secret: stored value is corrupt (salt)")
	}
	h := k.header(p, salt)
	k.mu.Lock()
	aead, ok := k.cache[h]
	k.mu.Unlock()
	if !ok {
		if aead, err = k.derive(p, salt); err != nil {
			return Secret{}, err
		}
		k.mu.Lock()
		if len(k.cache) < maxCachedSalts {
			k.cache[h] = aead
		}
		k.mu.Unlock()
	}
	ct, err := base64.RawStdEncoding.DecodeString(ctB64)
	n := aead.NonceSize()
	if err != nil || len(ct) < n {
		return Secret{}, errors.New("secret: stored value is corrupt")
	}
	pt, err := aead.Open(nil, ct[:n], ct[n:], []byte(h))
	if err != nil {
		return Secret{}, ErrWrongMasterKey
	}
	return New(string(pt)), nil
}
