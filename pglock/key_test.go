package pglock

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Key
		how  string
	}{
		{"00000000000004d2", Int64Key(1234), "int64 form"},
		{"ffffffffffffffff", Int64Key(-1), "int64 form"},
		{"000004d2,ffffffff", PairKey(1234, -1), "pair form"},
		{"a", PairKey(0x61<<24, 0), "packed"},
		{"job-42", mustPack(t, "job-42"), "packed"},
		{"123456789", mustPack(t, "123456789"), "packed"},
		{"1234567890", Int64Key(hash64("1234567890")), "hashed: too long"},
		{"名前", Int64Key(hash64("名前")), "hashed: not ASCII"},
		{"nul\x00", Int64Key(hash64("nul\x00")), "hashed: NUL"},
		{"00000000000004D2", Int64Key(hash64("00000000000004D2")), "hashed: upper-case hex is not canonical"},
	} {
		t.Run(tc.how+"/"+tc.name, func(t *testing.T) {
			got, err := KeyOf(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func mustPack(t *testing.T, s string) Key {
	k, ok := pack(s)
	require.True(t, ok, s)
	return k
}

func TestKeyPackFirstChar(t *testing.T) {
	// "a" is 0x61 in the top 7 of 63 bits: k1 = 0x61 << (56-32).
	k, err := KeyOf("a")
	require.NoError(t, err)
	k1, k2 := k.Pair()
	assert.Equal(t, int32(0x61<<24), k1)
	assert.Equal(t, int32(0), k2)
}

func TestKeyOfInvalid(t *testing.T) {
	for _, name := range []string{"", "bad\xffutf8"} {
		_, err := KeyOf(name)
		assert.ErrorIs(t, err, core.ErrInvalidName, "%q", name)
	}
}

func TestParseKey(t *testing.T) {
	for _, s := range []string{"", "0", "00000000000004D2", "0000000000000004d2", "000004d2;ffffffff", "000004d2,fffffff", "g000000000000000", " 00000000000004d2"} {
		_, err := ParseKey(s)
		assert.ErrorIs(t, err, core.ErrInvalidArgument, "%q", s)
	}
	for _, k := range []Key{Int64Key(0), Int64Key(-1), Int64Key(1 << 62), PairKey(0, 0), PairKey(-1, 7), PairKey(1<<30, -1<<31)} {
		got, err := ParseKey(k.String())
		require.NoError(t, err)
		assert.Equal(t, k, got, k.String())
	}
}

func TestKeySpacesDistinct(t *testing.T) {
	assert.NotEqual(t, Int64Key(1), PairKey(0, 1))
	assert.NotEqual(t, Int64Key(1).String(), PairKey(0, 1).String())
}

func TestDerivedKeysDistinct(t *testing.T) {
	k, err := KeyOf("job")
	require.NoError(t, err)
	seen := map[Key]string{k: "mutex", derive("rw", k, 0): "rw"}
	for i := range 100 {
		d := derive("sem", k, i)
		_, dup := seen[d]
		require.False(t, dup, "slot %d", i)
		seen[d] = "sem"
	}
}

// FuzzKey checks that KeyOf never panics, that every key's canonical form
// parses back and names the same key, and that packing is lossless.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"a", "job-42", "123456789", "1234567890", "00000000000004d2", "000004d2,ffffffff", "名前", "nul\x00", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k, err := KeyOf(name)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidName) {
				t.Fatalf("KeyOf(%q): %v does not match ErrInvalidName", name, err)
			}
			return
		}
		s := k.String()
		back, err := ParseKey(s)
		if err != nil || back != k {
			t.Fatalf("ParseKey(%q) = %v, %v; want %v", s, back, err, k)
		}
		if again, err := KeyOf(s); err != nil || again != k {
			t.Fatalf("KeyOf(%q) = %v, %v; want %v", s, again, err, k)
		}
		if p, ok := pack(name); ok {
			if _, err := ParseKey(name); err != nil && p != k {
				t.Fatalf("packable %q mapped to %v, want %v", name, k, p)
			}
			if u, ok := unpack(p); !ok || u != name {
				t.Fatalf("unpack(pack(%q)) = %q, %v", name, u, ok)
			}
		}
		if len(name) <= maxPacked && strings.IndexByte(name, 0) < 0 && isASCII(name) && k.IsPair() == false {
			if _, err := ParseKey(name); err != nil {
				t.Fatalf("short ASCII %q was not packed", name)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > 0x7f {
			return false
		}
	}
	return true
}
