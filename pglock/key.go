package pglock

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/distlock/distlock/core/kit"
)

// Key is a PostgreSQL advisory lock key. PostgreSQL has two distinct key
// spaces: one int64 (the one-argument pg_advisory_lock functions) and a pair
// of int32 (the two-argument functions). Int64Key(1) and PairKey(0, 1) are
// different locks. The zero Key is the int64 key 0.
//
// A Key's String form is canonical and parses back with ParseKey:
// 16 lowercase hex digits for an int64 key ("00000000000004d2"), and
// "8hex,8hex" for a pair ("000004d2,ffffffff").
type Key struct {
	pair bool
	v    int64 // the int64 key, or uint32(k1)<<32 | uint32(k2)
}

// Int64Key returns the key that pg_advisory_lock(bigint) takes.
func Int64Key(k int64) Key { return Key{v: k} }

// PairKey returns the key that pg_advisory_lock(int, int) takes.
func PairKey(k1, k2 int32) Key {
	return Key{pair: true, v: int64(uint64(uint32(k1))<<32 | uint64(uint32(k2)))}
}

// IsPair reports whether k is in the int32-pair key space.
func (k Key) IsPair() bool { return k.pair }

// Int64 returns the int64 key. For a pair key it returns the two halves
// packed as k1<<32 | k2, which is not the same lock.
func (k Key) Int64() int64 { return k.v }

// Pair returns the two int32 halves of the key.
func (k Key) Pair() (k1, k2 int32) { return int32(uint64(k.v) >> 32), int32(uint32(k.v)) }

// String returns the canonical form of k, which ParseKey and KeyOf map back
// to k.
func (k Key) String() string {
	if k.pair {
		k1, k2 := k.Pair()
		return fmt.Sprintf("%08x,%08x", uint32(k1), uint32(k2))
	}
	return fmt.Sprintf("%016x", uint64(k.v))
}

// ParseKey parses the canonical form of a Key (see Key.String): 16 lowercase
// hex digits, or two groups of 8 lowercase hex digits joined by a comma.
// Anything else is an error matching core.ErrInvalidArgument.
func ParseKey(s string) (Key, error) {
	switch {
	case len(s) == 16 && isLowerHex(s):
		v, err := strconv.ParseUint(s, 16, 64)
		if err == nil {
			return Int64Key(int64(v)), nil
		}
	case len(s) == 17 && s[8] == ',' && isLowerHex(s[:8]) && isLowerHex(s[9:]):
		k1, err1 := strconv.ParseUint(s[:8], 16, 32)
		k2, err2 := strconv.ParseUint(s[9:], 16, 32)
		if err1 == nil && err2 == nil {
			return PairKey(int32(uint32(k1)), int32(uint32(k2))), nil
		}
	}
	return Key{}, kit.Invalid("pglock: %q is not a canonical advisory key", s)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// maxPacked is the longest name packed losslessly: 9 characters of 7 bits.
const maxPacked = 9

// KeyOf maps a lock name to its advisory key. The mapping is fixed, so every
// process (and every other client that follows it) agrees on it:
//
//   - A name in canonical key form (see Key.String) is that key, so a lock
//     shared with non-Go code can be named by its numbers.
//   - A name of 1 to 9 ASCII characters, none of them NUL, is packed
//     losslessly into the int32-pair space: 7 bits per character, left
//     aligned, zero padded. Two such names never share a key.
//   - Any other name is hashed: the first 8 bytes of the SHA-256 of the
//     name's bytes, big-endian, are the int64 key.
//
// A packed name may coincide with a pair-form name, and a hashed name with a
// 16-hex-digit name (and, with probability 2⁻⁶⁴ per pair, with another
// hashed name): do not mix explicit keys with names that are not meant to
// be the same lock. The empty name and invalid UTF-8 are rejected with an
// error matching core.ErrInvalidName.
func KeyOf(name string) (Key, error) {
	if err := kit.ValidateName(name); err != nil {
		return Key{}, err
	}
	if k, err := ParseKey(name); err == nil {
		return k, nil
	}
	if k, ok := pack(name); ok {
		return k, nil
	}
	return Int64Key(hash64(name)), nil
}

func pack(name string) (Key, bool) {
	if len(name) == 0 || len(name) > maxPacked {
		return Key{}, false
	}
	var v uint64
	for i := 0; i < maxPacked; i++ {
		var c byte
		if i < len(name) {
			c = name[i]
			if c == 0 || c > 0x7f {
				return Key{}, false
			}
		}
		v = v<<7 | uint64(c)
	}
	return Key{pair: true, v: int64(v)}, true
}

// unpack inverts pack; it exists to prove (in tests) that packing is lossless.
func unpack(k Key) (string, bool) {
	if !k.pair || k.v < 0 {
		return "", false
	}
	var b [maxPacked]byte
	v := uint64(k.v)
	for i := maxPacked - 1; i >= 0; i-- {
		b[i] = byte(v & 0x7f)
		v >>= 7
	}
	n := 0
	for n < maxPacked && b[n] != 0 {
		n++
	}
	for _, c := range b[n:] {
		if c != 0 {
			return "", false
		}
	}
	return string(b[:n]), n > 0
}

func hash64(s string) int64 {
	sum := sha256.Sum256([]byte(s))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// derive returns a key in the int64 space for one of the primitives built
// on a name's key, so that a mutex, a reader-writer lock and a semaphore of
// the same name are distinct locks.
func derive(domain string, k Key, slot int) Key {
	return Int64Key(hash64("distlock/" + domain + "\x00" + k.String() + "\x00" + strconv.Itoa(slot)))
}

// lockTag identifies the advisory lock in pg_locks: classid, objid and
// objsubid, as PostgreSQL stores the key.
func (k Key) lockTag() (classid, objid int64, objsubid int16) {
	if k.pair {
		return int64(uint32(uint64(k.v) >> 32)), int64(uint32(k.v)), 2
	}
	return int64(uint32(uint64(k.v) >> 32)), int64(uint32(k.v)), 1
}
