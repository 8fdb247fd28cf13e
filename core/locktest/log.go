package locktest

import (
	"bytes"
	"log/slog"
	"sync"
)

// LogBuffer collects what a logger writes, for a test to read while the
// backend under test may still be writing. Logger returns a text logger
// that writes into it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logger whose lines, in slog's text format, go to b.
func (b *LogBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
