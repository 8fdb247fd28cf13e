// Package distlock opens any distlock backend from a URL:
//
//	locks, err := distlock.Open(ctx, os.Getenv("LOCK_URL")) // "redis://cache:6379/0?ttl=10s", ...
//	if err != nil {
//		return err
//	}
//	defer locks.Close()
//	h, err := locks.Mutex("reports/daily").Acquire(ctx)
//
// It is the one module that brings every backend and its driver. Code that
// uses one backend imports only that backend's module and calls its Open
// (redislock.Open, pglock.Open, ...), which reads the same URLs; its
// options, given after the URL, override the URL's settings.
//
// # Schemes
//
//	file:///var/lock/app                           filelock: lock files in a directory on this host
//	mem:// , mem://NAME                            memlock: in this process (NAME: shared by every Open of it)
//	redis://[user:pass@]host[:port][/db]           redislock: one Redis server
//	rediss://...                                   the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2,...    redislock: a Redis Cluster, from seed nodes
//	rediss+cluster://...                           the same over TLS
//	redlock://[user:pass@]h1:p1,h2:p2,h3:p3[/db]   redlock: RedLock over independent servers
//	redlocks://...                                 the same over TLS
//	postgres://... , postgresql://...              pglock: a pgx connection string, pool settings included
//	nats://[user:pass@]host[:port][,host:port...]  natslock: NATS JetStream KV
//	nats+tls://...                                 the same, requiring TLS
//	mysql://[user:pass@]host[:port]/database       mysqllock: MySQL or MariaDB user-level locks
//	etcd://[user:pass@]host[:port][,host:port...]  etcdlock: etcd v3, a line of keys per lock
//
// # Parameters
//
// Query parameters set the backend's options; durations are written as in
// Go ("500ms", "30s", "1m30s"). A backend rejects a parameter it does not
// take, except those it hands to its driver: go-redis's (dial_timeout,
// pool_size, client_name, protocol, ...) on redis and redlock URLs; pgx's
// (sslmode, connect_timeout, pool_max_conns, ..., and run-time parameters
// such as application_name, which the server checks) on postgres URLs;
// go-sql-driver/mysql's DSN parameters (tls, readTimeout, ...) on mysql URLs.
//
//	parameter       value     backends                                        option
//	identity        text      file mem redis redlock postgres mysql nats etcd WithIdentity: the holder name core.Inspector reports
//	ttl             duration  redis redlock nats etcd                         WithTTL: how long a dead holder blocks others
//	prefix          text      redis redlock etcd                              WithPrefix: the start of every key
//	renew_interval  duration  redis redlock nats                              WithRenewInterval
//	drift_margin    duration  redis redlock                                   WithDriftMargin
//	handoff_max     integer   redis postgres mysql nats                       WithLocalHandoff: grants handed on in a row (0: off)
//	handoff_span    duration  redis postgres mysql nats                       WithLocalHandoff: the longest run of handoffs
//	min_validity    duration  redlock                                         WithMinValidity
//	restart_guard   duration  redlock                                         WithRestartGuard
//	keepalive       duration  postgres mysql etcd                             WithKeepalive (etcd: the client's gRPC keepalive): how fast a lost connection is seen
//	max_conns       integer   postgres mysql                                  WithMaxConns: the Provider's own connections
//	timeout         duration  postgres mysql nats etcd                        WithTimeout: the bound of one statement or request
//	fence_table     text      postgres mysql                                  WithFenceTable (needed for core.Inspector)
//	fence_sequence  text      postgres mysql                                  WithFenceSequence
//	members_table   text      postgres mysql                                  WithMembersTable
//	bucket          text      nats                                            WithBucket
//	members_bucket  text      nats                                            WithMembersBucket
//	member_max_ttl  duration  nats                                            WithMemberMaxTTL
//	js_domain       text      nats                                            the JetStream domain (jetstream.NewWithDomain)
//	js_api_prefix   text      nats                                            the JetStream API prefix (jetstream.NewWithAPIPrefix)
//	connect_timeout duration  nats                                            the dial timeout (nats.Timeout)
//	dial_timeout    duration  etcd                                            the dial timeout (clientv3.Config.DialTimeout, default 5s)
//	check_interval  duration  file                                            WithCheckInterval
//
// Each option's documentation, in its backend's package, gives its default
// and its bounds; a value out of bounds is an error from Open as from New.
//
// # Errors
//
// A bad URL is an error matching core.ErrInvalidArgument that quotes the
// URL, with the password replaced by xxxxx, and names the part at fault:
// the scheme, a host, the path, a parameter. Open never panics on any
// input; its parser is fuzzed (FuzzOpen).
package distlock
