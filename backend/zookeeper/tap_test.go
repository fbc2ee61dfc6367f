package zookeeper

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

// fakeConn serves a fixed byte stream in reads of at most chunk bytes and records writes.
type fakeConn struct {
	net.Conn
	in       []byte
	chunk    int
	written  bytes.Buffer
	closed   int       // Close calls
	deadline time.Time // the last read deadline set
}

func (f *fakeConn) Read(p []byte) (int, error) {
	if len(f.in) == 0 {
		return 0, errors.New("eof")
	}
	n := min(len(p), f.chunk, len(f.in))
	copy(p, f.in[:n])
	f.in = f.in[n:]
	return n, nil
}
func (f *fakeConn) Write(p []byte) (int, error)       { return f.written.Write(p) }
func (f *fakeConn) SetReadDeadline(d time.Time) error { f.deadline = d; return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error  { return nil }
func (f *fakeConn) Close() error                      { f.closed++; return nil }
func (f *fakeConn) RemoteAddr() net.Addr              { return &net.TCPAddr{} }
func (f *fakeConn) LocalAddr() net.Addr               { return &net.TCPAddr{} }
func (f *fakeConn) SetDeadline(d time.Time) error     { return nil }
func (f *fakeConn) readAll(c *tapConn, bufSize int) {
	buf := make([]byte, bufSize)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

func connectResponse(timeoutMs int32, sid int64, passwd []byte) []byte {
	var f frameBuilder
	f.i32(0).i32(timeoutMs).i64(sid).buf(passwd).u8(0)
	return f.frame()
}

func replyFrame(xid int32, zxid int64, code int32, body []byte) []byte {
	var f frameBuilder
	f.i32(xid).i64(zxid).i32(code)
	f.b = append(f.b, body...)
	return f.frame()
}

func requestFrame(xid, op int32, body []byte) []byte {
	var f frameBuilder
	f.i32(xid).i32(op)
	f.b = append(f.b, body...)
	return f.frame()
}

func createBody(path string) []byte {
	var f frameBuilder
	f.str(path).buf([]byte("owner")).i32(0).i32(1)
	return f.b
}

// TestTapParsesFragmentedStreams feeds a connect response, a large reply, a watch event, a
// ping reply and create replies in reads of every size from 1 byte up, and checks what the
// tap learnt: session, timeout, password and the czxid of the successful create only.
func TestTapParsesFragmentedStreams(t *testing.T) {
	pw := []byte("0123456789abcdef")
	var stream []byte
	stream = append(stream, connectResponse(4000, 0x1234, pw)...)
	stream = append(stream, replyFrame(1, 100, 0, bytes.Repeat([]byte{7}, 5000))...) // a big getChildren
	stream = append(stream, replyFrame(-1, -1, 0, []byte{0, 0, 0, 2, 0, 0, 0, 3})...)
	stream = append(stream, replyFrame(-2, 0, 0, nil)...)
	stream = append(stream, replyFrame(2, 0x500000007, 0, []byte{0, 0, 0, 0})...) // create /a: ok
	stream = append(stream, replyFrame(3, 0x500000008, -110, nil)...)             // create /b: exists
	for chunk := 1; chunk <= 64; chunk++ {
		tp := newTap(nil, time.Second, 0, nil, nil, nil)
		fc := &fakeConn{in: append([]byte(nil), stream...), chunk: chunk}
		c := &tapConn{Conn: fc, t: tp}
		tp.conn = c
		c.Write(append(make([]byte, 4), make([]byte, 40)...)) // the connect request
		c.Write(requestFrame(1, 12, []byte{0, 0, 0, 1, '/'}))
		c.Write(requestFrame(2, opCreate, createBody("/a")))
		c.Write(requestFrame(3, opCreate, createBody("/b")))
		fc.readAll(c, 4096)
		select {
		case <-tp.ready:
		default:
			t.Fatalf("chunk %d: no handshake seen", chunk)
		}
		if zid, gotPw := tp.credentials(); zid != 0x1234 || !bytes.Equal(gotPw, pw) {
			t.Fatalf("chunk %d: credentials %x %q", chunk, zid, gotPw)
		}
		if tp.sessionTimeout() != 4*time.Second {
			t.Fatalf("chunk %d: timeout %v", chunk, tp.sessionTimeout())
		}
		if z, ok := tp.takeCreated("/a"); !ok || z != 0x500000007 {
			t.Fatalf("chunk %d: czxid of /a = %x, %v", chunk, z, ok)
		}
		if _, ok := tp.takeCreated("/a"); ok {
			t.Fatalf("chunk %d: czxid of /a collected twice", chunk)
		}
		if z, ok := tp.takeCreated("/b"); ok {
			t.Fatalf("chunk %d: failed create of /b recorded czxid %x", chunk, z)
		}
		if tp.outstanding != 0 {
			t.Fatalf("chunk %d: %d requests outstanding after all replies", chunk, tp.outstanding)
		}
	}
}

// TestTapEndsSessionOnReplacement: a reconnect answered with another session id (or none)
// marks the session gone, and the dialer refuses from then on.
func TestTapEndsSessionOnReplacement(t *testing.T) {
	for _, newSid := range []int64{0, 0x999} {
		gone := 0
		tp := newTap(nil, time.Second, 0, nil, nil, func() { gone++ })
		first := &tapConn{Conn: &fakeConn{in: connectResponse(4000, 0x1234, make([]byte, 16)), chunk: 100}, t: tp}
		first.Conn.(*fakeConn).readAll(first, 100)
		if tp.gone.Load() {
			t.Fatal("gone after the first handshake")
		}
		// the same session again: a plain reconnect
		again := &tapConn{Conn: &fakeConn{in: connectResponse(4000, 0x1234, make([]byte, 16)), chunk: 100}, t: tp}
		again.Conn.(*fakeConn).readAll(again, 100)
		if tp.gone.Load() {
			t.Fatal("gone after reconnecting to the same session")
		}
		other := &tapConn{Conn: &fakeConn{in: connectResponse(4000, newSid, make([]byte, 16)), chunk: 100}, t: tp}
		other.Conn.(*fakeConn).readAll(other, 100)
		if !tp.gone.Load() || gone != 1 {
			t.Fatalf("session id %x after 1234: gone=%v (callbacks %d), want gone", newSid, tp.gone.Load(), gone)
		}
		if _, err := tp.dial("tcp", "127.0.0.1:1", time.Second); !errors.Is(err, errSessionGone) {
			t.Fatalf("dial after the session ended: %v, want errSessionGone", err)
		}
	}
}

// TestTapDropsPingsAndAbandonedClose: pings never reach the server (so only keep-alives renew
// the session); after abandon, neither does the close-session request.
func TestTapDropsPingsAndAbandonedClose(t *testing.T) {
	tp := newTap(nil, time.Second, 0, nil, nil, nil)
	fc := &fakeConn{chunk: 100}
	c := &tapConn{Conn: fc, t: tp}
	tp.conn = c
	connect := append([]byte{0, 0, 0, 8}, make([]byte, 8)...)
	c.Write(connect)
	ping := requestFrame(xidPing, opPing, nil)
	if n, err := c.Write(ping); n != len(ping) || err != nil {
		t.Fatalf("ping write = %d, %v", n, err)
	}
	exists := requestFrame(1, 3, []byte{0, 0, 0, 1, '/', 0})
	c.Write(exists)
	closeReq := requestFrame(2, opCloseSession, nil)
	c.Write(closeReq)
	want := append(append(append([]byte(nil), connect...), exists...), closeReq...)
	if !bytes.Equal(fc.written.Bytes(), want) {
		t.Fatalf("written %x, want %x (ping dropped)", fc.written.Bytes(), want)
	}
	tp.abandon()
	fc.written.Reset()
	c.Write(requestFrame(3, opCloseSession, nil))
	if fc.written.Len() != 0 {
		t.Fatalf("close-session request written after abandon: %x", fc.written.Bytes())
	}
}

// TestTapDropsSilentConnection: a keep-alive's silence check (dropSilent) closes an
// established connection that has waited long enough for a byte since it wrote a request, and
// leaves alone one whose handshake is still out (connectBound bounds it), one that has read
// since it wrote, one whose wait is still short, and one whose only write was a ping the tap
// dropped (nothing is awaited).
func TestTapDropsSilentConnection(t *testing.T) {
	tp := newTap(nil, time.Second, 0, nil, nil, nil)
	fc := &fakeConn{chunk: 100}
	c := &tapConn{Conn: fc, t: tp}
	tp.conn = c
	c.Write(append([]byte{0, 0, 0, 8}, make([]byte, 8)...)) // the connect request
	if tp.dropSilent(0) || fc.closed != 0 {
		t.Fatal("a connection whose handshake is out was closed")
	}
	fc.in = connectResponse(3000, 7, []byte("pw"))
	buf := make([]byte, 64)
	c.Read(buf)
	exists := requestFrame(1, 3, []byte{0, 0, 0, 1, '/', 0})
	c.Write(exists)
	if tp.dropSilent(time.Hour) || fc.closed != 0 {
		t.Fatal("a connection waiting less than the limit was closed")
	}
	fc.in = replyFrame(1, 5, 0, nil)
	c.Read(buf)
	if tp.dropSilent(0) || fc.closed != 0 {
		t.Fatal("a connection that read since it wrote was closed")
	}
	c.Write(requestFrame(xidPing, opPing, nil))
	if tp.dropSilent(0) || fc.closed != 0 {
		t.Fatal("a connection whose only write since it read was a dropped ping was closed")
	}
	c.Write(requestFrame(2, 3, []byte{0, 0, 0, 1, '/', 0}))
	if !tp.dropSilent(0) || fc.closed != 1 {
		t.Fatalf("a silent connection awaiting a reply: closed %d times, want 1", fc.closed)
	}
}

// TestTapCloseBehindPendingHandshake: closing while go-zookeeper's connect request awaits its
// answer sends the close request right behind it, on the same connection (a connection of
// the tap's own would race with it at the server); closing before the connect request is
// written stops it instead, so that closeAlone's close has no connect request to race with;
// on an established connection the tap leaves the close to go-zookeeper.
func TestTapCloseBehindPendingHandshake(t *testing.T) {
	connect := append([]byte{0, 0, 0, 8}, make([]byte, 8)...)

	tp := newTap(nil, time.Second, 0, nil, nil, nil)
	fc := &fakeConn{chunk: 100}
	c := &tapConn{Conn: fc, t: tp}
	tp.conn = c
	c.Write(connect)
	if !tp.beginClose() || !tp.closeSent.Load() {
		t.Fatal("beginClose behind a pending connect request: want the close sent on the connection")
	}
	want := append(append([]byte(nil), connect...), requestFrame(xidTapClose, opCloseSession, nil)...)
	if !bytes.Equal(fc.written.Bytes(), want) {
		t.Fatalf("written %x, want the connect request then the close %x", fc.written.Bytes(), want)
	}

	tp = newTap(nil, time.Second, 0, nil, nil, nil)
	fc = &fakeConn{chunk: 100}
	c = &tapConn{Conn: fc, t: tp}
	tp.conn = c
	if tp.beginClose() {
		t.Fatal("beginClose before the connect request: want closeAlone")
	}
	if _, err := c.Write(connect); !errors.Is(err, errSessionGone) || fc.written.Len() != 0 {
		t.Fatalf("connect request after beginClose: %v, written %x; want refused", err, fc.written.Bytes())
	}

	tp = newTap(nil, time.Second, 0, nil, nil, nil)
	fc = &fakeConn{in: connectResponse(4000, 0x1234, make([]byte, 16)), chunk: 100}
	c = &tapConn{Conn: fc, t: tp}
	tp.conn = c
	c.Write(connect)
	c.Read(make([]byte, 100))
	fc.written.Reset()
	if !tp.beginClose() || tp.closeSent.Load() || fc.written.Len() != 0 {
		t.Fatalf("beginClose on an established connection: closeSent=%v, written %x; want go-zookeeper's close", tp.closeSent.Load(), fc.written.Bytes())
	}
}

// TestTapClosesExpiredReconnect: a reconnect answered with "session expired" (id 0) is closed
// by the tap, since go-zookeeper neither uses nor closes it, but only once go-zookeeper has
// read the whole answer (or it would see a failed read instead of the expiry); the session's
// earlier connection is left alone.
func TestTapClosesExpiredReconnect(t *testing.T) {
	connect := append([]byte{0, 0, 0, 8}, make([]byte, 8)...)
	for chunk := 1; chunk <= 48; chunk++ {
		tp := newTap(nil, time.Second, 0, nil, nil, nil)
		first := &tapConn{Conn: &fakeConn{in: connectResponse(4000, 0x1234, make([]byte, 16)), chunk: 100}, t: tp}
		first.Conn.(*fakeConn).readAll(first, 100)
		fc := &fakeConn{in: connectResponse(0, 0, make([]byte, 16)), chunk: chunk}
		c := &tapConn{Conn: fc, t: tp}
		tp.conn = c
		c.Write(connect)
		// As go-zookeeper's authenticate: the length, then exactly the body.
		var got []byte
		for _, want := range []int{4, len(fc.in) - 4} {
			buf := make([]byte, want)
			for n := 0; n < want; {
				if fc.closed != 0 {
					t.Fatalf("chunk %d: closed after %d of %d bytes of the answer", chunk, len(got), len(got)+len(fc.in))
				}
				k, err := c.Read(buf[n:])
				if err != nil {
					t.Fatalf("chunk %d: read: %v", chunk, err)
				}
				got = append(got, buf[n:n+k]...)
				n += k
			}
		}
		if fc.closed != 1 {
			t.Fatalf("chunk %d: the expired reconnect was closed %d times once read; want once", chunk, fc.closed)
		}
		if !tp.gone.Load() {
			t.Fatalf("chunk %d: the session is not gone", chunk)
		}
		if first.Conn.(*fakeConn).closed != 0 {
			t.Fatalf("chunk %d: the first connection was closed", chunk)
		}
	}
}

// TestTapCloseOutcome: the close request's outcome is known once its reply is read (nil),
// once a connect response shows the session gone (nil), or once its connection fails first
// (an error); while it is awaited a read deadline runs, even if go-zookeeper awaits nothing.
func TestTapCloseOutcome(t *testing.T) {
	connect := append([]byte{0, 0, 0, 8}, make([]byte, 8)...)
	established := func(in []byte) (*tap, *fakeConn, *tapConn) {
		tp := newTap(nil, time.Second, 0, nil, nil, nil)
		fc := &fakeConn{in: append(connectResponse(4000, 0x1234, make([]byte, 16)), in...), chunk: 1000}
		c := &tapConn{Conn: fc, t: tp}
		tp.conn = c
		c.Write(connect)
		c.Read(make([]byte, len(connectResponse(4000, 0x1234, make([]byte, 16)))))
		return tp, fc, c
	}
	settled := func(tp *tap) (bool, error) {
		done, err := tp.closeOutcome()
		select {
		case <-done:
			return true, err()
		default:
			return false, nil
		}
	}

	// go-zookeeper's close on an established connection, then its reply.
	tp, fc, c := established(replyFrame(7, 0x10, 0, nil))
	if !tp.beginClose() {
		t.Fatal("beginClose on an established connection")
	}
	c.Write(requestFrame(7, opCloseSession, nil))
	if ok, _ := settled(tp); ok {
		t.Fatal("settled before the reply")
	}
	if fc.deadline.IsZero() {
		t.Fatal("no read deadline while the close reply is awaited")
	}
	c.Read(make([]byte, 100))
	if ok, err := settled(tp); !ok || err != nil {
		t.Fatalf("after the close reply: settled=%v, %v; want nil", ok, err)
	}

	// The connection fails before the reply.
	tp, _, c = established(nil)
	tp.beginClose()
	c.Write(requestFrame(7, opCloseSession, nil))
	c.Read(make([]byte, 100)) // fakeConn's end: an error
	if ok, err := settled(tp); !ok || !errors.Is(err, errCloseUnanswered) {
		t.Fatalf("after the connection failed: settled=%v, %v; want errCloseUnanswered", ok, err)
	}

	// The tap's close behind a pending connect request: answered, unanswered, or the session
	// gone already.
	for _, tc := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"answered", append(connectResponse(4000, 0x1234, make([]byte, 16)), replyFrame(xidTapClose, 0x11, 0, nil)...), nil},
		{"session gone", connectResponse(0, 0, make([]byte, 16)), nil},
		{"handshake unanswered", nil, errCloseUnanswered},
		{"close unanswered", connectResponse(4000, 0x1234, make([]byte, 16)), errCloseUnanswered},
	} {
		tp, _, _ := established(nil)
		fc := &fakeConn{in: tc.in, chunk: 1000}
		c := &tapConn{Conn: fc, t: tp}
		tp.conn = c
		c.Write(connect)
		if !tp.beginClose() || !tp.closeSent.Load() {
			t.Fatalf("%s: beginClose behind the connect request: want the close sent", tc.name)
		}
		for {
			if _, err := c.Read(make([]byte, 7)); err != nil {
				break
			}
			if c.inFrames == 0 {
				continue
			}
			c.SetReadDeadline(time.Time{}) // as go-zookeeper's receive loop between frames
			if ok, _ := settled(tp); !ok && fc.deadline.IsZero() {
				t.Fatalf("%s: no read deadline while the tap's close reply is awaited", tc.name)
			}
		}
		if ok, err := settled(tp); !ok || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("%s: settled=%v, %v; want %v", tc.name, ok, err, tc.err)
		}
	}
}
