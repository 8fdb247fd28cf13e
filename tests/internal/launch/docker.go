package launch

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Container images of the Docker engine.
const (
	redisImage    = "redis:7-alpine"
	postgresImage = "postgres:16-alpine"
	natsImage     = "nats:2-alpine"
)

// dockerServer is a server in a container made by testcontainers-go. Its
// port is published on a fixed loopback port chosen at creation, so Kill
// and Start (a container stop and start) keep the address.
type dockerServer struct {
	c     testcontainers.Container
	addr  string
	ready func(ctx context.Context) error
}

func (s *dockerServer) Addr() string { return s.addr }

func (s *dockerServer) Kill(t testing.TB) {
	t.Helper()
	var grace time.Duration // none: SIGKILL at once
	if err := s.c.Stop(context.Background(), &grace); err != nil {
		t.Fatalf("launch: docker stop: %v", err)
	}
}

func (s *dockerServer) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.c.Start(ctx); err != nil {
		t.Fatalf("launch: docker start: %v", err)
	}
	s.waitReady(t, ctx)
}

func (s *dockerServer) waitReady(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := waitUntil(startTimeout, func() error { return s.ready(ctx) }); err != nil {
		t.Fatalf("launch: %s did not become ready: %v", s.addr, err)
	}
}

func (s *dockerServer) Pause(t testing.TB)  { s.freeze(t, true) }
func (s *dockerServer) Resume(t testing.TB) { s.freeze(t, false) }

func (s *dockerServer) freeze(t testing.TB, pause bool) {
	t.Helper()
	ctx := context.Background()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("launch: docker client: %v", err)
	}
	defer cli.Close()
	if pause {
		_, err = cli.ContainerPause(ctx, s.c.GetContainerID(), client.ContainerPauseOptions{})
	} else {
		_, err = cli.ContainerUnpause(ctx, s.c.GetContainerID(), client.ContainerUnpauseOptions{})
	}
	if err != nil {
		t.Fatalf("launch: docker pause/unpause: %v", err)
	}
}

// runContainer starts image with its port published on a free loopback
// port, and removes the container when t ends.
func runContainer(t testing.TB, req testcontainers.ContainerRequest, port string,
	ready func(addr string) func(ctx context.Context) error) *dockerServer {
	t.Helper()
	host := freePort(t)
	cport, err := network.ParsePort(port)
	if err != nil {
		t.Fatalf("launch: %s: container port %q: %v", req.Image, port, err)
	}
	req.ExposedPorts = []string{port}
	req.HostConfigModifier = func(hc *container.HostConfig) {
		hc.PortBindings = network.PortMap{cport: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(host)}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // may pull the image
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
	})
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("launch: %s: %v", req.Image, err)
	}
	s := &dockerServer{c: c, addr: hostPort(host)}
	s.ready = ready(s.addr)
	s.waitReady(t, ctx)
	return s
}

func dockerRedis(t testing.TB, cfg RedisConfig) Server {
	t.Helper()
	cmd := []string{"redis-server", "--save", "", "--appendonly", "no"}
	if cfg.AOF {
		cmd = []string{"redis-server", "--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	}
	return runContainer(t, testcontainers.ContainerRequest{Image: redisImage, Cmd: cmd}, "6379/tcp",
		func(addr string) func(context.Context) error {
			return func(context.Context) error { return redisPing(addr) }
		})
}

func dockerNATS(t testing.TB) Server {
	t.Helper()
	return runContainer(t, testcontainers.ContainerRequest{Image: natsImage, Cmd: []string{"-js", "-sd", "/data"}},
		"4222/tcp", func(addr string) func(context.Context) error {
			return func(context.Context) error { return natsPing(addr) }
		})
}

func dockerPostgres(t testing.TB) Server {
	t.Helper()
	s := runContainer(t, testcontainers.ContainerRequest{
		Image: postgresImage,
		Env: map[string]string{
			"POSTGRES_USER":             "distlock",
			"POSTGRES_DB":               "distlock",
			"POSTGRES_HOST_AUTH_METHOD": "trust",
		},
		Cmd: []string{"postgres", "-c", "fsync=off", "-c", "max_connections=200"},
	}, "5432/tcp", func(addr string) func(context.Context) error {
		url := "postgres://distlock@" + addr + "/distlock?sslmode=disable"
		return func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			return conn.Ping(ctx)
		}
	})
	return &dockerPG{s}
}

// dockerPG reports its address as a URL.
type dockerPG struct{ *dockerServer }

func (s *dockerPG) Addr() string {
	return "postgres://distlock@" + s.addr + "/distlock?sslmode=disable"
}
