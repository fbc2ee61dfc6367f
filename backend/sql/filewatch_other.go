//go:build !linux

package sql

import (
	"errors"
	"sync/atomic"
)

// fileWatch is Linux-only (inotify); elsewhere the SQLite waker polls.
type fileWatch struct{ events chan struct{} }

// watchFile reports that there is no file watch here.
func watchFile(string, *atomic.Int64) (*fileWatch, error) {
	return nil, errors.New("sql sqlite: no file watch on this platform")
}

func (w *fileWatch) close() {}
