package kit

import (
	"crypto/sha256"
	"encoding/base32"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/distlock/distlock/core"
)

// ValidateName reports whether name can name a lock on every backend: it must
// be non-empty valid UTF-8. The error matches ErrInvalidName.
func ValidateName(name string) error {
	switch {
	case name == "":
		return core.ErrInvalidName
	case !utf8.ValidString(name):
		return wrapName(name, "not valid UTF-8")
	}
	return nil
}

func wrapName(name, why string) error {
	if len(name) > 40 {
		name = name[:40] + "…"
	}
	return &nameError{name: name, why: why}
}

type nameError struct{ name, why string }

func (e *nameError) Error() string {
	return core.ErrInvalidName.Error() + " " + quote(e.name) + ": " + e.why
}
func (e *nameError) Unwrap() error { return core.ErrInvalidName }

func quote(s string) string { return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\"" }

// SafeNameMaxLen is the longest string SafeName returns.
const SafeNameMaxLen = safePrefixMax + 1 + safeHashLen

const (
	safePrefixMax = 32
	safeHashLen   = 26 // 130 bits of SHA-256
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// SafeName encodes any name into at most SafeNameMaxLen characters drawn from
// [A-Za-z0-9_-], safe as a file name on every common file system and as a key
// on every backend. It is a readable prefix of the name (other characters
// replaced by '_') followed by '-' and a lowercase Base32 SHA-256 hash of the
// exact name. Because the hash is always present and lowercase, distinct
// names map to distinct strings even on case-insensitive file systems, and no
// output can contain a path separator or be "." or "..".
func SafeName(name string) string {
	sum := sha256.Sum256([]byte(name))
	var b strings.Builder
	b.Grow(SafeNameMaxLen)
	for _, r := range name {
		if b.Len() == safePrefixMax {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	b.WriteByte('-')
	b.WriteString(lowerBase32.EncodeToString(sum[:])[:safeHashLen])
	return b.String()
}

// ValidateMember checks a Membership call's group and member id: the group
// as a lock name (the error matches ErrInvalidName), the id non-empty valid
// UTF-8 (the error matches ErrInvalidArgument).
func ValidateMember(group, id string) error {
	if err := ValidateName(group); err != nil {
		return err
	}
	if err := ValidateName(id); err != nil {
		return Invalid("member id: %v", err)
	}
	return nil
}

// ValidateAnnounce checks an Announce call's group, member id and value:
// the group and id as ValidateMember does, the value at most
// core.MaxMemberValue bytes (the error matches ErrInvalidArgument).
func ValidateAnnounce(group, id string, value []byte) error {
	if err := ValidateMember(group, id); err != nil {
		return err
	}
	if len(value) > core.MaxMemberValue {
		return Invalid("member value of %d bytes is over core.MaxMemberValue (%d)", len(value), core.MaxMemberValue)
	}
	return nil
}

// ValidateRegistration checks a registration's group, member id and value
// as ValidateAnnounce does, and that ttl is at least min (the error
// matches ErrInvalidArgument).
func ValidateRegistration(group, id string, value []byte, ttl, min time.Duration) error {
	if err := ValidateAnnounce(group, id, value); err != nil {
		return err
	}
	if ttl < min {
		return Invalid("ttl %v must be at least %v", ttl, min)
	}
	return nil
}

// SortMembers sorts ms by ID, in byte order, as core.Announcer lists them.
func SortMembers(ms []core.Member) {
	slices.SortFunc(ms, func(a, b core.Member) int { return strings.Compare(a.ID, b.ID) })
}
