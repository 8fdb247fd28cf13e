package launch_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/tests/internal/launch"
)

func TestMySQL(t *testing.T) {
	srv := launch.MySQL(t)
	ping := func() error {
		db, err := sql.Open("mysql", srv.Addr())
		require.NoError(t, err)
		defer db.Close()
		var one int
		return db.QueryRow("SELECT 1").Scan(&one)
	}
	require.NoError(t, ping())
	srv.Kill(t)
	require.Error(t, ping())
	srv.Start(t)
	require.NoError(t, ping(), "the same address after a restart")
}
