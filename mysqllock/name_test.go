package mysqllock

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var serverNameRE = regexp.MustCompile(`^dl/(m|s|s[0-9]+)/[A-Za-z0-9_]*-[a-z2-7]{26}$`)

func TestLockName(t *testing.T) {
	long := strings.Repeat("y", 999)
	for _, c := range []struct{ kind, name string }{
		{kindMutex, "a"},
		{kindSem, "orders"},
		{slotKind(MaxSemaphore - 1), strings.Repeat("x", 1000)},
		{kindMutex, long + "a"},
		{kindMutex, "名前 🔒"},
	} {
		got := lockName(c.kind, c.name)
		require.LessOrEqual(t, len(got), maxLockName, got)
		require.Regexp(t, serverNameRE, got)
		require.True(t, strings.HasPrefix(got, c.kind), got)
		require.Equal(t, got, lockName(c.kind, c.name), "the mapping is fixed")
	}
	// Names that differ only in case, at the end of a long name, or in
	// characters the readable part replaces are different locks; so are
	// the kinds of one name.
	for _, pair := range [][2]string{{"CaseName", "casename"}, {long + "a", long + "b"}, {"a/b", "a_b"}} {
		require.NotEqual(t, lockName(kindMutex, pair[0]), lockName(kindMutex, pair[1]))
	}
	require.NotEqual(t, lockName(kindMutex, "x"), lockName(kindSem, "x"))
	require.NotEqual(t, lockName(slotKind(1), "x"), lockName(slotKind(11), "x"))
	require.Equal(t, lockName(kindMutex, "x"), LockName("x"))
	require.Equal(t, lockName(slotKind(3), "x"), SlotName("x", 3))
}

func FuzzLockName(f *testing.F) {
	f.Add("a", "b", uint16(0))
	f.Add("CaseName", "casename", uint16(3))
	f.Add(strings.Repeat("z", 300), strings.Repeat("z", 299), uint16(1023))
	f.Fuzz(func(t *testing.T, a, b string, slot uint16) {
		for _, kind := range []string{kindMutex, kindSem, slotKind(int(slot) % MaxSemaphore)} {
			na, nb := lockName(kind, a), lockName(kind, b)
			if len(na) > maxLockName || !serverNameRE.MatchString(na) {
				t.Fatalf("lockName(%q, %q) = %q: not a valid server name", kind, a, na)
			}
			if (a == b) != (na == nb) {
				t.Fatalf("names %q and %q map to %q and %q", a, b, na, nb)
			}
		}
	})
}
