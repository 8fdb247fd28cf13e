package etcdlock

import (
	"context"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func TestZZProfile(t *testing.T) {
	cli := connect(t, endpoints(t))
	p := newProviderOn(t, cli, WithTTL(30*time.Second))
	l := p.Mutex("zz2").(*inspected)
	ctx := context.Background()
	s, _ := p.lease(ctx)
	ss, _ := concurrency.NewSession(cli, concurrency.WithTTL(30))
	defer ss.Close()
	res := make([][]time.Duration, 4)
	for i := 0; i < 300; i++ {
		for v := 0; v < 4; v++ {
			prefix := "zz/raw/"
			if v&1 == 1 {
				prefix = l.q.prefix
			}
			lease := ss.Lease()
			if v&2 == 2 {
				lease = s.id
			}
			key := prefix + "k"
			t0 := time.Now()
			cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix()).Then(clientv3.OpPut(key, "x", clientv3.WithLease(lease))).Commit()
			cli.Delete(ctx, key)
			res[v] = append(res[v], time.Since(t0))
		}
	}
	for v, x := range res {
		sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
		t.Logf("variant %d (ourprefix=%v ourlease=%v) p50 %v p90 %v", v, v&1 == 1, v&2 == 2, x[len(x)/2], x[len(x)*9/10])
	}
}
