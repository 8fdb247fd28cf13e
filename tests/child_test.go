package tests

import (
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// startSelf starts this test binary again as a child process that runs the
// tests matching run only, with env added to its environment, and returns
// it with its standard output; its standard error is the parent's. The
// caller stops and reaps the child.
func startSelf(t *testing.T, run string, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return cmd, out
}
