package kit_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", false},
		{"bad\xff", false},
		{"a", true},
		{"nul\x00", true},
		{strings.Repeat("é", 5000), true},
	} {
		err := kit.ValidateName(tc.name)
		if tc.ok != (err == nil) {
			t.Errorf("ValidateName(%q) = %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, core.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", tc.name, err)
		}
	}
}

var safeRE = regexp.MustCompile(`^[A-Za-z0-9_]*-[a-z2-7]{26}$`)

func TestSafeName(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{
		"a", "A", "..", ".", "/", `\`, "../../etc/passwd", "nul\x00", "🔒",
		strings.Repeat("x", 1000), strings.Repeat("x", 999) + "y",
		"CaseName", "casename", "a/b", "a_b", "a-b",
	} {
		s := kit.SafeName(name)
		if !safeRE.MatchString(s) || len(s) > kit.SafeNameMaxLen {
			t.Errorf("SafeName(%q) = %q: not in the safe alphabet or too long", name, s)
		}
		if strings.ToLower(s) != s && strings.EqualFold(s, seen[strings.ToLower(s)]) {
			t.Errorf("SafeName(%q) collides case-insensitively", name)
		}
		if prev, dup := seen[strings.ToLower(s)]; dup {
			t.Errorf("SafeName(%q) = SafeName(%q) = %q", name, prev, s)
		}
		seen[strings.ToLower(s)] = name
		if kit.SafeName(name) != s {
			t.Errorf("SafeName(%q) is not deterministic", name)
		}
	}
}

func FuzzSafeName(f *testing.F) {
	for _, s := range []string{"", "a", "../x", "\x00", "🔒"} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := kit.SafeName(a), kit.SafeName(b)
		if !safeRE.MatchString(sa) || len(sa) > kit.SafeNameMaxLen {
			t.Fatalf("SafeName(%q) = %q", a, sa)
		}
		if a != b && strings.EqualFold(sa, sb) {
			t.Fatalf("SafeName(%q) and SafeName(%q) collide: %q", a, b, sa)
		}
	})
}
