package pollleasetest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/distlock/distlock/polllease/pollleasetest"
)

type fakeMember struct{ owned, pollable []string }

func (m fakeMember) Owned() []string            { return m.owned }
func (m fakeMember) IsOwned(target string) bool { return slices.Contains(m.pollable, target) }

func TestFleet(t *testing.T) {
	f := pollleasetest.NewFleet[fakeMember]()
	stopped := false
	f.Add("b", fakeMember{owned: []string{"t2", "t3"}, pollable: []string{"t2"}}, func() error { stopped = true; return nil })
	f.Add("a", fakeMember{owned: []string{"t1"}, pollable: []string{"t1"}}, pollleasetest.Run(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}))
	if ids := f.IDs(); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("IDs = %v", ids)
	}
	if !f.Covered([]string{"t1", "t2"}) || f.Covered([]string{"t1", "t3"}) {
		t.Fatalf("Covered wrong; owners %v", f.Owners())
	}
	if err := f.Stop("b"); err != nil || !stopped {
		t.Fatalf("Stop: %v, stopped %v", err, stopped)
	}
	f.StopAll()
	if _, ok := f.Get("a"); ok || len(f.IDs()) != 0 {
		t.Fatal("instances left after StopAll")
	}

	var l pollleasetest.Log[int]
	for i := range 5 {
		l.Add(i)
	}
	if got := l.Where(func(i int) bool { return i%2 == 0 }); !slices.Equal(got, []int{0, 2, 4}) {
		t.Fatalf("Where = %v", got)
	}
}
