package sql

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"unsafe"

	"golang.org/x/sys/unix"
)

// fileWatch signals writes to a SQLite database file, its WAL or its rollback journal (by any
// process on the host) through inotify on their directory: the waker then sleeps until a
// commit may have happened instead of waking every few milliseconds.
type fileWatch struct {
	f      *os.File
	events chan struct{} // capacity 1: a pending event stands for all since
	done   chan struct{} // closed when the reader has exited
	once   sync.Once
}

// watchFile starts watching path's directory for writes to path and its companions; it counts
// its wake-ups in wakes.
func watchFile(path string, wakes *atomic.Int64) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking descriptor goes through the runtime's poller: Close ends a pending Read.
	w := &fileWatch{f: os.NewFile(uintptr(fd), "inotify"), events: make(chan struct{}, 1), done: make(chan struct{})}
	names := map[string]bool{base: true, base + "-wal": true, base + "-journal": true}
	go w.read(names, wakes)
	return w, nil
}

func (w *fileWatch) read(names map[string]bool, wakes *atomic.Int64) {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		wakes.Add(1)
		hit := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if names[cString(nameBytes)] || ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				hit = true
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if hit {
			select {
			case w.events <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the watch and waits for its reader.
func (w *fileWatch) close() {
	w.once.Do(func() { w.f.Close() })
	<-w.done
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
