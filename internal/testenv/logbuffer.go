package testenv

import (
	"bytes"
	"log/slog"
	"sync"
)

// LogBuffer collects what a logger writes, safe for the concurrent writes of a slog handler,
// so that a test can check which warnings a backend logged.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a text logger at debug level that writes to l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
