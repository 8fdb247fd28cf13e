package polllease

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/distlock/distlock/core"
)

// Holdings: where the Membership is a core.Announcer, each heartbeat
// announces the targets this instance holds, and the assignment starts from
// the owners the announcements name (AssignFrom), so a join or a leave
// moves only what the load bounds make move. The value is the format byte
// holdingsV1, then per target held, in increasing order of its key
// (targetKey), the key as 8 bytes big-endian and the lease's fencing token
// as a uvarint. A value this version cannot read names no target.

const holdingsV1 = 1

// maxHoldings is how many targets fit in one announcement at most (8 bytes
// of key and up to 10 of token each): 14,563. An instance that holds more
// announces those of the lowest keys and logs a warning; the others count
// the rest as unowned, so they are assigned afresh in the other instances'
// views, which try them every tick and find them held.
const maxHoldings = (core.MaxMemberValue - 1) / 18

// targetKey is the 64-bit key that stands for target in an announcement:
// its rendezvous hash with no member. Two targets of one fleet share a key
// with odds of about T² / 2⁶⁵.
func targetKey(target string) uint64 { return score("", target) }

type holding struct {
	key, token uint64
}

// encodeHoldings returns the announcement of held (target → token), of at
// most maxHoldings of them.
func encodeHoldings(held map[string]uint64) []byte {
	hs := make([]holding, 0, len(held))
	for t, tok := range held {
		hs = append(hs, holding{targetKey(t), tok})
	}
	slices.SortFunc(hs, func(a, b holding) int { return cmp.Compare(a.key, b.key) })
	hs = hs[:min(len(hs), maxHoldings)]
	b := make([]byte, 1, 1+18*len(hs))
	b[0] = holdingsV1
	for _, h := range hs {
		b = binary.BigEndian.AppendUint64(b, h.key)
		b = binary.AppendUvarint(b, h.token)
	}
	return b
}

// decodeHoldings returns the holdings an announcement names, none when it
// is empty, of another format or malformed.
func decodeHoldings(b []byte) []holding {
	if len(b) == 0 || b[0] != holdingsV1 {
		return nil
	}
	b = b[1:]
	var hs []holding
	for len(b) > 0 {
		if len(b) < 9 {
			return nil
		}
		key := binary.BigEndian.Uint64(b)
		tok, n := binary.Uvarint(b[8:])
		if n <= 0 {
			return nil
		}
		hs = append(hs, holding{key, tok})
		b = b[8+n:]
	}
	return hs
}

// ownersOf returns the owner of each target the announcements of members
// name, this instance (self, holding mine) counting as the owner of what it
// holds whatever the others announced. Where two others claim a target,
// the higher fencing token wins, it being the later grant, and then the
// member first in order.
func ownersOf(targets map[string]bool, members []core.Member, self string, mine map[string]uint64) map[string]string {
	type claim struct {
		member string
		token  uint64
	}
	claims := make(map[uint64]claim)
	for _, m := range members {
		if m.ID == self {
			continue
		}
		for _, h := range decodeHoldings(m.Value) {
			if c, ok := claims[h.key]; !ok || h.token > c.token || (h.token == c.token && m.ID < c.member) {
				claims[h.key] = claim{m.ID, h.token}
			}
		}
	}
	owners := make(map[string]string, len(targets))
	for t := range targets {
		if _, ok := mine[t]; ok {
			owners[t] = self
		} else if c, ok := claims[targetKey(t)]; ok {
			owners[t] = c.member
		}
	}
	return owners
}
