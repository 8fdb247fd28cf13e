package tests

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// selfChild is this test binary run again as a child process.
type selfChild struct {
	cmd *exec.Cmd
	// lines has the child's standard output, a line at a time; it is
	// closed when the child closes it (exits).
	lines chan string
}

// startSelf starts this test binary again as a child process that runs the
// tests matching run only, with env added to its environment; its standard
// error is the parent's. When t ends the child is resumed if stopped,
// killed and reaped, and lines is drained.
func startSelf(t *testing.T, run string, env ...string) *selfChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &selfChild{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		for range c.lines { // let the reader finish before Wait
		}
		_ = cmd.Wait()
	})
	return c
}
