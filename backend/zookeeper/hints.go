package zookeeper

import (
	"context"

	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind
// loses hints (hints only save latency, never safety).
const hintBuffer = 1024

// Hints delivers hints until ctx is done or the backend is closed, then closes the channel:
// Released when a lease node is deleted (a release, or a holder session that closed or
// expired) and GroupChanged when a member joins or leaves a group, whichever client made the
// change. While there are subscribers the backend keeps one extra connection with persistent
// recursive watches on the leases and groups nodes (ZooKeeper 3.6+); on older servers, or
// while that connection is down, hints come from the watches of the backend's own sessions
// (on leases they hold or found held, and groups they read). A hint may repeat.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	ch := make(chan spi.Hint, hintBuffer)
	b.hmu.Lock()
	if err := b.checkOpen(); err != nil {
		b.hmu.Unlock()
		return nil, err
	}
	b.subs[ch] = struct{}{}
	if b.watcher == nil {
		b.watcher = newWatcher(b)
	}
	b.hmu.Unlock()
	// Unsubscribe when ctx ends or the backend closes (whose Close then closes ch, if this has
	// not): a subscription whose ctx never ends must not outlive the backend. If the backend
	// is closed by now, its Close closes ch.
	b.background(func() {
		select {
		case <-ctx.Done():
		case <-b.stop.Done():
		}
		var stop *watcher
		b.hmu.Lock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
		if len(b.subs) == 0 {
			stop, b.watcher = b.watcher, nil
		}
		b.hmu.Unlock()
		if stop != nil {
			stop.close()
		}
	})
	return ch, nil
}

// hint publishes a hint seen by one of the backend's sessions (a watch on a lease or group it
// touched, or its own release) unless the watcher connection, which sees every change, is up
// and answering (watcher.hearing).
func (b *Backend) hint(kind spi.HintKind, name string) {
	b.hmu.Lock()
	w := b.watcher
	b.hmu.Unlock()
	if w != nil && w.hearing() {
		return
	}
	b.publish(kind, name)
}

// publish sends a hint to every subscriber without blocking.
func (b *Backend) publish(kind spi.HintKind, name string) {
	b.hmu.Lock()
	defer b.hmu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- spi.Hint{Kind: kind, Name: name}:
		default:
		}
	}
}

// stopHints closes every subscriber's channel and stops the watcher (on Close).
func (b *Backend) stopHints() {
	b.hmu.Lock()
	for ch := range b.subs {
		close(ch)
		delete(b.subs, ch)
	}
	w := b.watcher
	b.watcher = nil
	b.hmu.Unlock()
	if w != nil {
		w.close()
	}
}
