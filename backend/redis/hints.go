package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// hintBuffer is each subscriber's channel capacity; a subscriber that falls further behind
// loses hints (hints only save latency, never safety).
const hintBuffer = 1024

// hub fans the messages of the backend's one pub/sub connection out to the Hints subscribers.
type hub struct {
	b    *Backend
	mu   sync.Mutex
	subs map[chan spi.Hint]struct{}
	ps   *goredis.PubSub
}

// Hints delivers a Released hint for every release (or close) of a lease and a GroupChanged
// hint for every change of a group's membership, by any client, until ctx is done; then it
// closes the channel. While there are subscribers the backend keeps one pub/sub connection
// that PSUBSCRIBEs wire.ReleasedChannelMatch and wire.GroupChangedChannelMatch (a Redis Cluster
// propagates PUBLISH to every node, so one node is enough); go-redis reconnects it and
// resubscribes after a connection loss, and hints published meanwhile are lost. A hint may
// repeat.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	h := &b.hub
	ch := make(chan spi.Hint, hintBuffer)
	h.mu.Lock()
	if b.closed.Load() {
		h.mu.Unlock()
		return nil, spi.ErrClosed
	}
	if h.subs == nil {
		h.subs = map[chan spi.Hint]struct{}{}
	}
	h.subs[ch] = struct{}{}
	if h.ps == nil {
		ps := b.c.PSubscribe(context.Background(), wire.ReleasedChannelMatch, wire.GroupChangedChannelMatch)
		if err := confirm(ctx, ps); err != nil {
			ps.Close()
			delete(h.subs, ch)
			h.mu.Unlock()
			return nil, b.fail("hints", err)
		}
		h.ps = ps
		go h.pump(ps)
	}
	h.mu.Unlock()
	go func() {
		<-ctx.Done()
		h.remove(ch)
	}()
	return ch, nil
}

// confirm waits for the server to confirm both pattern subscriptions and returns the error the
// server replied with instead (NOPERM: an ACL user needs the channel patterns
// simba:lease:{*} and simba:group:{*} literally, or allchannels). A connection failure is not
// an error here: go-redis reconnects and subscribes again by itself.
func confirm(ctx context.Context, ps *goredis.PubSub) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for n := 0; n < 2; {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if re := goredis.Error(nil); errors.As(err, &re) {
				return err
			}
			return nil
		}
		if _, ok := msg.(*goredis.Subscription); ok {
			n++
		}
	}
	return nil
}

// pump forwards the messages of ps until it is closed.
func (h *hub) pump(ps *goredis.PubSub) {
	for m := range ps.Channel(goredis.WithChannelSize(hintBuffer)) {
		var hint spi.Hint
		switch m.Pattern {
		case wire.ReleasedChannelMatch:
			name, ok := wire.ParseLeaseKey(m.Channel)
			if !ok {
				continue
			}
			hint = spi.Hint{Kind: spi.Released, Name: name}
		case wire.GroupChangedChannelMatch:
			name, ok := wire.ParseGroupKey(m.Channel)
			if !ok {
				continue
			}
			hint = spi.Hint{Kind: spi.GroupChanged, Name: name}
		default:
			continue
		}
		h.deliver(hint)
	}
}

// deliver sends hint to every subscriber.
func (h *hub) deliver(hint spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- hint:
		default: // a slow subscriber loses the hint
		}
	}
}

// releasedLocally wakes the backend's own waiters (other clients of this process on this
// backend) at once after a release by this backend, before the server's PUBLISH comes back;
// a waiter that acts on both pays at most one more acquire (the engine damps hints that prove
// false).
func (h *hub) releasedLocally(name string) {
	h.deliver(spi.Hint{Kind: spi.Released, Name: name})
}

// remove ends one subscription, and the pub/sub connection with the last one.
func (h *hub) remove(ch chan spi.Hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; !ok {
		return
	}
	delete(h.subs, ch)
	close(ch)
	if len(h.subs) == 0 && h.ps != nil {
		h.ps.Close()
		h.ps = nil
	}
}

// shutdown ends every subscription (Close).
func (h *hub) shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
	if h.ps != nil {
		h.ps.Close()
		h.ps = nil
	}
}
