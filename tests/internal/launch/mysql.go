package launch

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/testcontainers/testcontainers-go"
)

const mysqlImage = "mariadb:11"

// MySQL starts a MariaDB server for t, with a database distlock and a user
// distlock (password distlock). Its Addr is a DSN for
// github.com/go-sql-driver/mysql. Kill is SIGKILL (a crash); each commit
// reaches the OS before it returns (innodb_flush_log_at_trx_commit = 2),
// so a Kill loses no committed write.
func MySQL(t testing.TB) Server {
	t.Helper()
	if useDocker(t) {
		return dockerMySQL(t)
	}
	return localMySQL(t)
}

// mysqlServer reports its address as a DSN.
type mysqlServer struct {
	Server
	hostPort func() string
}

func (s mysqlServer) Addr() string { return "distlock:distlock@tcp(" + s.hostPort() + ")/distlock" }

func localMySQL(t testing.TB) Server {
	t.Helper()
	mysqld, ok := findBinary("mariadbd")
	installDB, ok2 := findBinary("mariadb-install-db")
	if !ok || !ok2 {
		missing(t, "MariaDB (mariadbd, mariadb-install-db)")
	}
	// Not t.TempDir: the socket's path must stay short.
	dir, err := os.MkdirTemp("", "distlock-mysql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var asRoot []string
	if os.Geteuid() == 0 {
		asRoot = []string{"--user=root"} // mariadbd refuses root without it
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	args := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
		"--skip-test-db"}, asRoot...)
	if out, err := exec.Command(installDB, args...).CombinedOutput(); err != nil {
		t.Fatalf("launch: mariadb-install-db: %v\n%s", err, out)
	}
	p := &proc{name: "mariadbd", bin: mysqld, ready: mysqlGreets, args: func(port int) []string {
		return append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + sock,
			"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--skip-name-resolve",
			"--log-error=" + filepath.Join(dir, "error.log"), "--pid-file=" + filepath.Join(dir, "pid"),
			"--skip-log-bin", "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M",
			"--max-connections=500"}, asRoot...)
	}}
	p.Start(t)
	t.Cleanup(func() { p.Kill(t) })
	root, err := sql.Open("mysql", "root@unix("+sock+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{"CREATE DATABASE distlock", "CREATE USER distlock@'%' IDENTIFIED BY 'distlock'",
		"GRANT ALL ON *.* TO distlock@'%'"} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("launch: MariaDB: %s: %v", q, err)
		}
	}
	return mysqlServer{Server: p, hostPort: p.Addr}
}

// mysqlGreets checks that a MySQL server sends its handshake at addr
// (protocol version 10 after the 4-byte packet header): it has finished
// starting up.
func mysqlGreets(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b [5]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	if b[4] != 10 {
		return fmt.Errorf("not a MySQL handshake: % x", b)
	}
	return nil
}

func dockerMySQL(t testing.TB) Server {
	t.Helper()
	s := runContainer(t, testcontainers.ContainerRequest{
		Image: mysqlImage,
		Env: map[string]string{
			"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1",
			"MARIADB_DATABASE":                  "distlock",
			"MARIADB_USER":                      "distlock",
			"MARIADB_PASSWORD":                  "distlock",
		},
		Cmd: []string{"--innodb-flush-log-at-trx-commit=2", "--max-connections=500"},
	}, "3306/tcp", func(addr string) func(context.Context) error {
		// The image's entrypoint runs a server of its own while it sets up:
		// only a login as distlock shows the real one is up.
		return func(ctx context.Context) error {
			db, err := sql.Open("mysql", "distlock:distlock@tcp("+addr+")/distlock")
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return db.PingContext(ctx)
		}
	})
	return mysqlServer{Server: s, hostPort: s.Addr}
}
