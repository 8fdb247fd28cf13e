package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/election"
)

// Each event is logged as OBSERVABILITY.md lists it, before OnEvent sees
// it.
func TestLogger(t *testing.T) {
	m := newMemLocker(uniqueName(t))
	m.setFail(errors.New("store down"))
	var logged locktest.LogBuffer
	c := start(t, m.as("a"), election.Config{
		ID:           "a",
		Logger:       logged.Logger(),
		RetryBackoff: kit.Backoff{Min: time.Millisecond, Max: time.Millisecond},
		ResignDelay:  time.Hour,
	})
	c.next(election.CampaignFailed)
	m.setFail(nil)
	term := c.next(election.Promoted).Term
	require.NoError(t, c.e.Resign(context.Background()))
	c.next(election.Demoted)
	for _, want := range []string{
		fmt.Sprintf(`level=WARN msg="distlock: election campaign failed" group=%s id=a err=`, m.name),
		fmt.Sprintf(`level=INFO msg="distlock: election won" group=%s id=a term=%d leader=a`, m.name, term),
		fmt.Sprintf(`level=INFO msg="distlock: election leader changed" group=%s id=a leader=a`, m.name),
		fmt.Sprintf(`level=INFO msg="distlock: election term ended" group=%s id=a term=%d err="election: resigned"`, m.name, term),
	} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("no line with %s", want)
		}
	}
	if t.Failed() {
		t.Logf("logged:\n%s", logged.String())
	}
}
