package redisop

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IdentityTag encodes a holder identity for owner values: base64url, so it
// holds no ':', '#', '.', '/' or '+', which owner values and the messages
// that carry them use as separators.
func IdentityTag(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// NewTaggedOwner returns a fresh owner value carrying an identity tag made
// by IdentityTag: "<32 hex digits>.<tag>". It is as unique as NewOwner's,
// and OwnerIdentity reads the identity back.
func NewTaggedOwner(tag string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	var sb strings.Builder
	sb.Grow(2*len(b) + 1 + len(tag))
	var hx [32]byte
	hex.Encode(hx[:], b[:])
	sb.Write(hx[:])
	sb.WriteByte('.')
	sb.WriteString(tag)
	return sb.String()
}

// OwnerIdentity returns the identity carried by an owner value made by
// NewTaggedOwner, or "" for any other owner value.
func OwnerIdentity(owner string) string {
	_, tag, ok := strings.Cut(owner, ".")
	if !ok {
		return ""
	}
	id, err := base64.RawURLEncoding.DecodeString(tag)
	if err != nil {
		return ""
	}
	return string(id)
}

// MutexOwner splits the value of a mutex key, "<owner>:<token>" with "/"
// and a spare token or a "+" (waiters queue) possibly after it, into the
// owner and the token text.
func MutexOwner(v string) (owner, token string) {
	owner, token, _ = strings.Cut(strings.TrimSuffix(v, "+"), ":")
	token, _, _ = strings.Cut(token, "/")
	return owner, token
}

// GrantOf reads who holds l (a mutex or the write side of a reader-writer
// lock) on this server and the name's durable counter (0 where the server
// has none): one round trip (an MGET; both keys share the name's hash tag).
// owner is "" when the lock is free here. It serves the majority read of
// package redlock's Holder: on a server that holds a grant the counter is
// the grant's token, or the holder's token once the token was written back.
func (c *Client) GrantOf(ctx context.Context, l Lock) (owner string, counter uint64, err error) {
	if l.Kind != KindMutex && l.Kind != KindWrite {
		return "", 0, errors.New("redisop: GrantOf reads mutexes and write sides only")
	}
	vs, err := c.rdb.MGet(ctx, c.Key(l), c.counterKey(l)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	v, _ := vs[0].(string)
	if l.Kind == KindMutex {
		v, _ = MutexOwner(v)
	}
	if s, _ := vs[1].(string); s != "" {
		if counter, err = strconv.ParseUint(s, 10, 64); err != nil {
			return "", 0, errors.New("redisop: unreadable counter " + strconv.Quote(s))
		}
	}
	return v, counter, nil
}
