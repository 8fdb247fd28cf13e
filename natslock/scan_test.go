package natslock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core/locktest"
)

// TestScanRacesExpiry scans keys as they expire: a scan must end with the
// keys live at that moment, not wait for one that expired under it.
func TestScanRacesExpiry(t *testing.T) {
	js := connect(t, locktest.RequireEnv(t, "DISTLOCK_NATS_URL"))
	bucket := fmt.Sprintf("distlock_scan_%08x", rand.Uint32())
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })
	const ttl = 300 * time.Millisecond
	p := newProviderOn(t, js, WithBucket(bucket), WithTTL(ttl), WithTimeout(5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scans := 0
	for i := range 10 {
		for j := range 3 {
			_, err := p.kv.Put(ctx, fmt.Sprintf("r.%d-%d", i, j), nil)
			require.NoError(t, err)
		}
		for n := 1; n > 0; scans++ {
			var err error
			n, err = p.countLive(ctx, "r.*") // a scan that waits for an expired key times out
			require.NoError(t, err, "scan %d", scans)
		}
	}
	t.Logf("%d scans", scans)
}
