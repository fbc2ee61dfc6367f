package zookeeper

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/connbound"
	"github.com/simba-go/simba/internal/joinerr"
	"github.com/simba-go/simba/spi"
)

// ZooKeeper wire constants the tap needs (jute framing: a 4-byte big-endian length, then the
// record). Request header: xid int32, opcode int32. Reply header: xid int32, zxid int64,
// err int32. The first frame each way on a TCP connection is the connect request/response.
const (
	opCreate       = 1
	opSetData      = 5
	opMulti        = 14
	multiHeaderLen = 9 // a multi-op's part header: type int32, done bool, err int32
	opPing         = 11
	opCloseSession = -11
	xidWatchEvent  = -1
	xidPing        = -2
	xidOwnClose    = 1 // the close request of closeAlone's own connection
	// xidTapClose is the close request the tap sends behind go-zookeeper's pending connect
	// request (see beginClose): negative, so that it can never be taken for the reply to one of
	// go-zookeeper's requests (which it only logs, should the handshake be answered after all).
	xidTapClose    = -3
	replyHeaderLen = 16
)

// errSessionGone is what the tap's dialer answers once the session it is bound to has ended:
// go-zookeeper would otherwise open a fresh session on the same *zk.Conn by itself.
var errSessionGone = errors.New("zookeeper: the session of this connection has ended; not reconnecting")

// tap is bound to one *zk.Conn and so to one ZooKeeper session. It wraps every TCP connection
// go-zookeeper dials and reads the protocol as it passes, because go-zookeeper neither exposes
// nor lets a caller control what Simba needs:
//
//   - The negotiated session timeout, id and password (from each connect response).
//   - Session replacement: when a reconnect finds the session expired (the connect response
//     carries another id), the tap marks the session gone before go-zookeeper sees the reply,
//     and its dialer refuses every later dial, so no request can ever run under a new session.
//   - The czxid of each created node: the zxid of a successful create reply (go-zookeeper's
//     Create returns only the path), so an acquire costs one round trip.
//   - Renewal: a Simba session lives while its keep-alives arrive, so the tap drops
//     go-zookeeper's automatic pings; it then also replaces go-zookeeper's idle read timeout
//     (which would otherwise reconnect, and so renew the session, every 2/3 of the timeout)
//     by one that runs only while a request awaits its reply.
//   - A bounded handshake: go-zookeeper waits ten receive timeouts for a connect response,
//     holding every queued request meanwhile; the tap gives it one reply timeout (see
//     tapConn.SetReadDeadline).
//   - Crash-like shutdown: once abandoned, nothing more is written, the close-session request
//     least of all (it closes the connection instead: see abandon), so closing the backend
//     leaves the session to expire at the server like a crashed client's.
//   - A close that reaches the server while go-zookeeper has no established connection (see
//     beginClose and closeAlone), and its confirmation: the reply to the close request, or a
//     connect response without the session (see closeOutcome).
//   - The connection of a reconnect that the server answers with "session expired", which
//     go-zookeeper neither uses nor closes, is closed once go-zookeeper has read that answer
//     (see tapConn.Read).
//
// Apart from the dropped pings and close requests, a connect request it refuses once the
// session is being closed and the close request it adds behind a pending one (beginClose),
// the tap never changes a byte.
type tap struct {
	now         func() time.Duration // the backend's monotonic clock
	dialTimeout time.Duration
	// asked is the session timeout asked for: it bounds connection attempts (connectBound)
	// until the server has negotiated one.
	asked time.Duration
	// cut counts the connection attempts given up in a row at connectBound (see there), of
	// servers servers.
	cut     atomic.Int32
	servers int
	dialer  zk.Dialer   // the transport (net.DialTimeout unless WithDialer)
	tls     *tls.Config // when set, every connection is TLS over the dialer's
	// tlsFailed holds the last TLS handshake or verification failure (see tlsFailure).
	tlsFailed atomic.Pointer[error]
	dialErr   atomic.Pointer[error] // the last failed connection attempt, for error messages
	// answered: a server has answered a connect request (the tap's first handshake).
	answered atomic.Bool
	// failed counts the connection attempts that failed: a dial that failed, or a connection
	// the server closed before any byte of its connect response (a server that takes
	// connections but does not serve: one out of its quorum, over its connection limit, or a
	// proxy or load balancer in front of a server that is down).
	failed atomic.Int64
	// onFail, when set, is called with the number of failed attempts after each failure before
	// any server answered (connect: every server refused, unreachable or closing).
	onFail atomic.Pointer[func(failed int64)]
	onGone func() // called once, on go-zookeeper's goroutine, when the session ends
	// tokenRoot, when set, is the prefix ("<leases root>/") of the only paths whose creates
	// request records for takeCreated: those of lease nodes, whose czxid is a token. Set
	// before the tap is used. The creates of waiter, member, group and queue nodes were kept
	// too, and nothing ever took them: one entry per join and per wait, for the session's life.
	tokenRoot string

	ready     chan struct{} // closed at the first successful handshake
	readyOnce sync.Once
	sid       atomic.Int64 // bound session id (0 until the first handshake)
	timeoutMs atomic.Int32 // negotiated session timeout
	openedAt  atomic.Int64 // when the connect request that created the session was sent
	gone      atomic.Bool
	goneOnce  sync.Once
	abandoned atomic.Bool
	// dialCtx is the context of the tap's dials (a connection's dial and TLS handshake),
	// cancelled by abandon (stopDials): a dial still hanging when Close drops the session (a
	// dropped SYN, waited up to connectBound, 5 s for a session timeout of 30 s) ends at once,
	// not after Close's wait for the connection's goroutines.
	dialCtx   context.Context
	stopDials context.CancelFunc
	// standInOut is closed once dial has handed out a stand-in (see standInDialed).
	standInOut  chan struct{}
	standInOnce sync.Once
	closing     atomic.Bool // the session is being closed: no more dials nor connect requests (see beginClose)
	closeSent   atomic.Bool // a close-session request went out on go-zookeeper's connection
	// closeDone is closed once the outcome of the close request that went out on closeConn is
	// known: closeErr, nil when the server answered it (see closeOutcome).
	closeDone chan struct{}

	mu          sync.Mutex
	passwd      []byte
	addr        string           // the server last dialled
	conn        *tapConn         // the current TCP connection
	outstanding int              // requests on conn awaiting their reply
	creates     map[int32]string // xid → path of an outstanding create on conn
	created     map[string]int64 // path → czxid of creates replied to but not yet collected
	// lastCreate is the path of the last create recorded in creates: a create of the same
	// path (a name locked again) takes this string instead of a copy of the frame's bytes.
	lastCreate string
	// releases holds, by lease node path, the early releases whose multi-op is being sent
	// (see releaseWritten); expecting counts them, so that Write looks only while any is.
	releases  map[string]*leaseReq
	expecting atomic.Int32
	// The close request whose answer closeOutcome awaits: the connection it went out on (nil
	// until one did) and its request id; closeErr is its outcome once closeSettled.
	closeConn    *tapConn
	closeXid     int32
	closeSettled bool
	closeErr     error
}

func newTap(now func() time.Duration, dialTimeout, asked time.Duration, dialer zk.Dialer, tlsCfg *tls.Config, onGone func()) *tap {
	dialCtx, stopDials := context.WithCancel(context.Background())
	return &tap{
		dialCtx:     dialCtx,
		stopDials:   stopDials,
		now:         now,
		dialTimeout: dialTimeout,
		asked:       asked,
		dialer:      dialer,
		tls:         tlsCfg,
		onGone:      onGone,
		ready:       make(chan struct{}),
		closeDone:   make(chan struct{}),
		creates:     map[int32]string{},
		created:     map[string]int64{},
		releases:    map[string]*leaseReq{},
		standInOut:  make(chan struct{}),
	}
}

// expectRelease notes r, an early release (leaseReq.early) about to send its multi-op: once
// the multi-op is written to the connection, releaseWritten ends r's claim of its name.
func (t *tap) expectRelease(r *leaseReq) {
	t.mu.Lock()
	t.releases[r.path] = r
	t.mu.Unlock()
	t.expecting.Add(1)
}

// unexpectRelease drops r's note once its multi-op is over (answered, or failed); r.claimEnded
// then tells whether releaseWritten ended its claim.
func (t *tap) unexpectRelease(r *leaseReq) {
	t.mu.Lock()
	if t.releases[r.path] == r {
		delete(t.releases, r.path)
		t.expecting.Add(-1)
	}
	t.mu.Unlock()
}

// releaseWritten ends the claim of the release whose multi-op p (a whole request frame) was
// just written to a connection, if one awaits that (expectRelease).
//
// Why a release's claim can end when its multi-op is written rather than answered: the claim
// keeps the session's next create of the name from reaching the server before the release's
// multi-op, which would delete the new node (see session.claim). ZooKeeper applies one
// session's requests in the order its connection delivers them, and go-zookeeper writes every
// request of a connection from one goroutine, in the order taken from its queue. A create
// queued once the multi-op is written therefore goes out behind it on the same connection, and
// the server reads it after the multi-op, or not at all. Should that connection fail first,
// the create goes out on a later connection, and go-zookeeper has failed every request of the
// failed one (the multi-op's Multi returns ErrConnectionClosed) before it dials again: the
// order is then what it was when the claim lasted until the multi-op's outcome, a failure
// included (the release marks the name uncertain either way). A multi-op not written (a failed
// write, an abandoned connection) ends no claim: the release ends it when the request is over.
func (t *tap) releaseWritten(p []byte) {
	// The frame: length, xid, op, then the multi-op's first part: its header (type, done, err)
	// and the setData's path (length, bytes).
	const at = 4 + 8 + multiHeaderLen
	if len(p) < at+4 || int32(binary.BigEndian.Uint32(p[12:])) != opSetData {
		return
	}
	n := int(binary.BigEndian.Uint32(p[at:]))
	if n < 0 || at+4+n > len(p) {
		return
	}
	path := p[at+4 : at+4+n]
	t.mu.Lock()
	r := t.releases[string(path)]
	if r == nil {
		t.mu.Unlock()
		return
	}
	delete(t.releases, r.path)
	t.expecting.Add(-1)
	r.claimEnded = true
	s, name := r.s, r.name // r may go back to its pool once the lock is released
	t.mu.Unlock()
	s.unclaim(name)
}

// Connection attempts: a dial and its session handshake (TLS included) are given up after
// connectBound, so that a server that swallows the connection (a dropped SYN, or a server that
// takes it and never answers) does not hold the session on it while the connection string
// names others: go-zookeeper gives a dial its connect timeout (1 s) and waits ten receive
// timeouts for the handshake's answer, and the backend waited at least Config.Timeout (10 s
// by default) for it, while a session of TTL 3 s has at most 2 s left after a disconnection.
//
// connectBound is how long a dial and its session handshake may take: the session timeout
// (the one asked until the server negotiates one) / connbound.Divisor, at least
// connbound.Min, doubled for each round of the servers in which every attempt was given up
// (any other outcome, a refusal included, starts the count over: a server swallowing
// connections ahead of one that refuses them for a moment does not lengthen the bound), at
// most Config.Timeout.
func (t *tap) connectBound() time.Duration {
	timeout := t.sessionTimeout()
	if timeout <= 0 {
		timeout = t.asked
	}
	limit := t.dialTimeout
	if limit <= 0 {
		limit = DefaultTimeout
	}
	return connbound.Bound(timeout, limit, int(t.cut.Load()), t.servers)
}

// isTimeout reports whether err is a dial's, handshake's or read's timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded)
}

// dial is the go-zookeeper Dialer: it refuses once the session is gone or being closed, and
// gives a connection attempt connectBound (go-zookeeper's timeout if shorter).
func (t *tap) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if t.abandoned.Load() {
		// Closed by Close: go-zookeeper's close request ends it at once (see standIn).
		sid, passwd := t.credentials()
		c := newStandIn(sid, passwd, t.timeoutMs.Load())
		t.standInOnce.Do(func() { close(t.standInOut) })
		return c, nil
	}
	if t.gone.Load() || t.closing.Load() {
		return nil, errSessionGone
	}
	t.mu.Lock()
	t.addr = address
	t.mu.Unlock()
	start := time.Now()
	bound := t.connectBound()
	if timeout <= 0 || bound < timeout {
		timeout = bound
	}
	c, err := dialTransport(t.dialCtx, t.dialer, t.tls, network, address, timeout)
	if err != nil {
		if t.dialCtx.Err() != nil {
			// Abandoned while dialling (Close): not a failed attempt. go-zookeeper's next dial
			// gets the stand-in.
			return nil, errSessionGone
		}
		if isTimeout(err) {
			t.cut.Add(1)
		} else {
			t.cut.Store(0)
		}
		t.noteTLS(err)
		t.attemptFailed(err)
		return nil, err
	}
	tc := &tapConn{Conn: c, t: t, hsDeadline: start.Add(bound)}
	t.mu.Lock()
	t.conn = tc
	t.outstanding = 0
	clear(t.creates)
	t.mu.Unlock()
	if t.gone.Load() { // gone while dialling
		c.Close()
		return nil, errSessionGone
	}
	return tc, nil
}

// attemptFailed records a connection attempt that failed with err (see tap.failed).
func (t *tap) attemptFailed(err error) {
	t.dialErr.Store(&err)
	n := t.failed.Add(1)
	if f := t.onFail.Load(); f != nil && !t.answered.Load() {
		(*f)(n)
	}
}

// dialTransport connects to a server with dialer (a net.Dialer if nil) and, when cfg is set,
// completes a TLS handshake over it within timeout (the server name defaults to the address's
// host, as crypto/tls verifies it). ctx ending cuts the default dialer's dial and the TLS
// handshake short; a WithDialer dialer, which takes no context, runs to its own end.
func dialTransport(ctx context.Context, dialer zk.Dialer, cfg *tls.Config, network, address string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var err error
	if dialer == nil {
		c, err = (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, address)
		dialer = net.DialTimeout // for plainTextZooKeeper
	} else {
		c, err = dialer(network, address, timeout)
	}
	if err != nil || cfg == nil {
		return c, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// A plain client port closes the connection on a ClientHello, and so does a
			// server over its connection limit or restarting: a plain-text ZooKeeper
			// handshake tells them apart.
			if perr := plainTextZooKeeper(dialer, network, address, timeout); perr != nil {
				return nil, perr
			}
		}
		return nil, err
	}
	return tc, nil
}

// errPlainText is a server that answers a plain-text ZooKeeper handshake where the client
// speaks TLS (isTLSFailure: permanent).
var errPlainText = errors.New("the DSN asks for TLS (zk+tls://) but the server does not speak TLS on this port: it answers a plain-text ZooKeeper handshake (use zk://, or the port of the servers' secureClientPort)")

// plainTextZooKeeper returns an error wrapping errPlainText if the server at address answers a
// plain-text ZooKeeper connect request with a connect response within timeout, nil otherwise
// (a server that closes this connection too, or does not answer). The request asks for a new
// session with the shortest timeout, which the server clamps to its minSessionTimeout: the
// session it may create expires that long after the probe closes the connection.
func plainTextZooKeeper(dialer zk.Dialer, network, address string, timeout time.Duration) error {
	c, err := dialer(network, address, timeout)
	if err != nil {
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout)) //nolint:errcheck // the reads fail instead
	// A new session (id 0, a password of 16 zero bytes) of timeout 1 ms, raised to the
	// server's minimum.
	if _, err := c.Write(connectFrame(1, 0, make([]byte, 16))); err != nil {
		return nil
	}
	var head [4]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil
	}
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd (4 + 16), readOnly: 36 or 37.
	if n := binary.BigEndian.Uint32(head[:]); n < 36 || n > 37 {
		return nil
	}
	return fmt.Errorf("%w: zookeeper: %s: %w", spi.ErrTLS, address, errPlainText)
}

// noteTLS records err if it is a TLS handshake or verification failure.
func (t *tap) noteTLS(err error) {
	if isTLSFailure(err) {
		t.tlsFailed.Store(&err)
	}
}

// tlsFailure returns the last TLS handshake or verification failure seen, or nil.
func (t *tap) tlsFailure() error {
	if p := t.tlsFailed.Load(); p != nil {
		return *p
	}
	return nil
}

// isTLSFailure reports whether err is a TLS failure that retrying will not heal: the server's
// certificate does not verify (unknown authority, wrong host name, expired), the peer does not
// speak TLS, or the server refused the handshake (an alert, e.g. for a missing or rejected
// client certificate). A connection reset or EOF during the handshake is not one: it may be a
// server restarting or over its connection limit.
func isTLSFailure(err error) bool {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		header     tls.RecordHeaderError
		alert      tls.AlertError
		constraint x509.ConstraintViolationError
	)
	if errors.Is(err, errPlainText) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &constraint) {
		return true
	}
	// crypto/tls reports an alert received over TCP as a *net.OpError "remote error" (e.g.
	// "remote error: tls: bad certificate" when the server rejects the client certificate).
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// markGone records that the session has ended (expired, closed or replaced).
func (t *tap) markGone() {
	t.goneOnce.Do(func() {
		t.gone.Store(true)
		if t.onGone != nil {
			t.onGone()
		}
	})
}

// abandon makes the connection go away like a crashed client's: no more dials, nothing
// written from now on reaches the server (the close-session request least of all), and the
// TCP connection is closed.
//
// An established connection that is idle (no write under way, no close request out) is
// closed only when go-zookeeper's close request comes to be written (see tapConn.Write), so
// abandon must be followed by go-zookeeper's Conn.Close. go-zookeeper's Conn.Close flags its
// connection loop to stop and then queues its close request, and waits up to a second for an
// answer: a connection closed before that request was handed to go-zookeeper's send loop left
// it to the race between the loop, which ends at once when it sees the flag, and the queueing,
// and a request queued after the loop had ended was answered by Conn.Close's one-second timer
// alone (a backend's Close took 1.0 s now and then). Closed once the send loop has taken the
// request, the connection's end answers it at once (go-zookeeper fails the requests awaiting
// replies with ErrClosing). A connection that is not established, or is writing (it could be
// stuck at a server that stopped reading), or awaits a close reply already, is closed at once.
//
// It reports whether go-zookeeper's connection loop is to dial again (its connection is
// closed, or it had none): it then gets a stand-in (see standIn), which its Conn.Close should
// wait for (standInDialed).
func (t *tap) abandon() (redial bool) {
	t.abandoned.Store(true)
	t.gone.Store(true)
	t.stopDials() // a dial under way ends now (see dialCtx)
	t.mu.Lock()
	c := t.conn
	closeOut := t.closeConn == c && c != nil && !t.closeSettled
	t.mu.Unlock()
	if c == nil {
		return true
	}
	// A Write that counted itself after this check sees abandoned (set above) and writes
	// nothing; one that counted itself before makes the check fail.
	if !c.answered.Load() || c.broken.Load() || c.writing.Load() != 0 || closeOut {
		c.Conn.Close()
		return true
	}
	return false
}

// standInDialed returns a channel closed once the dialer has handed go-zookeeper a stand-in.
func (t *tap) standInDialed() <-chan struct{} { return t.standInOut }

// established reports whether go-zookeeper's current connection has been answered its
// handshake and still carries the session: a close request sent now reaches the server, which
// answers it (unless it stopped answering meanwhile).
func (t *tap) established() bool {
	if t.gone.Load() || t.closing.Load() {
		return false
	}
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	return c != nil && c.answered.Load() && !c.broken.Load()
}

// beginClose starts the close of the bound session: from now on go-zookeeper may not dial
// again, nor send a connect request on a connection it has dialled, since a reconnect's
// connect request renews the session at the server. It reports whether the close goes over
// go-zookeeper's connection: when that is established, go-zookeeper's own close request
// takes it; when go-zookeeper's connect request is out and its answer awaited, beginClose
// sends a close request right behind it. Otherwise the caller closes the session with
// closeAlone.
//
// This matters under a one-way partition, where the client's bytes reach the server but the
// server's do not come back: go-zookeeper gives up on a connection whose replies stop,
// 2/3 of the session timeout after the request it waits for, and reconnects, and the
// client's deadline passes about then. A close requested while it reconnects went nowhere:
// go-zookeeper sends its close request only once the handshake is answered, which it never
// is, and stops reconnecting when closed; meanwhile the reconnect's connect request, which
// does get through, renewed the session. So the session, and the lease nodes of terms the
// client had already ended, stayed at the server for up to one more session timeout, or
// until the partition healed.
//
// A close behind a pending connect request must go on that same connection: the server
// moves a session to each connection whose connect request it processes, closing the one
// that had it, and it processes the connect requests of different connections concurrently.
// A connect request and close sent by closeAlone on a connection of its own would race with
// go-zookeeper's already sent one: if the server processed go-zookeeper's last, between
// closeAlone's connect request and its close (which the server reads only once the session
// is moved), it dropped closeAlone's connection with the close unread, and the session lived
// on over go-zookeeper's connection. On one connection the server reads the close after the
// connect request, once it has moved the session there.
func (t *tap) beginClose() (onConn bool) {
	t.closing.Store(true)
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil || c.broken.Load() || t.gone.Load() {
		return false
	}
	if c.answered.Load() {
		return true
	}
	// Under hsMu the connect request is either written in full or, closing being set, never
	// will be.
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	if !c.connectOut {
		return false
	}
	// Record before writing: the answer may be read before Write returns.
	t.closeOn(c, xidTapClose)
	if _, err := c.Conn.Write(closeFrame(xidTapClose)); err != nil {
		t.closeNotOn(c)
		return false
	}
	t.closeSent.Store(true)
	return true
}

// closeOn records that the session's close request, of request id xid, goes out on c; the
// first one is the one closeOutcome awaits.
func (t *tap) closeOn(c *tapConn, xid int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closeConn == nil && !t.closeSettled {
		t.closeConn, t.closeXid = c, xid
	}
}

// closeNotOn undoes closeOn(c, ...) after the write of the close request failed.
func (t *tap) closeNotOn(c *tapConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closeConn == c && !t.closeSettled {
		t.closeConn = nil
	}
}

// settleClose records err as the outcome of the close request awaited on c, if one is and its
// outcome is not known yet.
func (t *tap) settleClose(c *tapConn, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleCloseLocked(c, err)
}

func (t *tap) settleCloseLocked(c *tapConn, err error) {
	if t.closeConn != c || c == nil || t.closeSettled {
		return
	}
	t.closeSettled, t.closeErr = true, err
	close(t.closeDone)
}

// closeOutcome returns a channel that is closed once the outcome of the close request that went
// out on go-zookeeper's connection (its own, or the tap's behind a pending connect request) is
// known, and a function that returns it then: nil when the server answered the close, or
// answered the connection's connect request without the session (it had ended already), else
// why the connection failed first. Once a close request went out the outcome comes within the
// reply timeout: the read deadline runs while the answer is awaited (see armRead and
// tapConn.SetReadDeadline). Only the close request that went out first counts.
func (t *tap) closeOutcome() (<-chan struct{}, func() error) {
	return t.closeDone, func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.closeErr
	}
}

// closeAlone closes the bound session at the server over a connection of its own, for when
// go-zookeeper cannot (see beginClose): it dials the server go-zookeeper last dialled, then
// the others of servers in turn, and sends a connect request with the session's id and
// password followed at once by a close request, which the server processes once it has
// re-established the session on this connection (the Java client pipelines its first requests
// behind the connect request the same way). Both reach the server under a one-way partition.
// It waits for the close reply, or for the server to report the session gone, at most one
// session timeout, after which the session has expired at the server anyway; the connection
// stays open until then, since closing it earlier could reset it before the server has read
// the close request. It gives up when ctx ends.
func (t *tap) closeAlone(ctx context.Context, servers []string) error {
	sid, passwd := t.credentials()
	timeout := t.sessionTimeout()
	if sid == 0 || timeout <= 0 {
		return nil
	}
	t.mu.Lock()
	first := t.addr
	t.mu.Unlock()
	deadline := time.Now().Add(timeout)
	frames := closeSessionFrames(sid, passwd, t.timeoutMs.Load())
	var errs []error
	for i, addr := range append([]string{first}, servers...) {
		if addr == "" || (i > 0 && addr == first) {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		err := closeOver(ctx, t.dialer, t.tls, addr, min(left, max(t.dialTimeout, time.Second)), deadline, sid, frames)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	if len(errs) == 0 {
		return errors.New("no server to close the session at")
	}
	return joinerr.Join(errs...)
}

// closeSessionFrames is a connect request for session sid (with its password and a session
// timeout of timeoutMs) followed by a close request: sent on a fresh connection, the server
// moves the session to it and closes it there.
func closeSessionFrames(sid int64, passwd []byte, timeoutMs int32) []byte {
	return append(connectFrame(timeoutMs, sid, passwd), closeFrame(xidOwnClose)...)
}

// connectFrame is a connect request for session sid (0: a new one) with password passwd and a
// session timeout of timeoutMs.
func connectFrame(timeoutMs int32, sid int64, passwd []byte) []byte {
	var req frameBuilder
	// connect: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
	return req.i32(0).i64(0).i32(timeoutMs).i64(sid).buf(passwd).u8(0).frame()
}

// closeFrame is a close-session request of request id xid.
func closeFrame(xid int32) []byte {
	var f frameBuilder
	return f.i32(xid).i32(opCloseSession).frame()
}

// closeOver sends frames (a connect request for session sid and a close request) to addr
// and waits until deadline, or until ctx ends, for the close reply or a connect response
// without the session.
func closeOver(ctx context.Context, dialer zk.Dialer, tlsCfg *tls.Config, addr string, dialTimeout time.Duration, deadline time.Time, sid int64, frames []byte) error {
	c, err := dialTransport(ctx, dialer, tlsCfg, "tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	c.SetDeadline(deadline)
	if _, err := c.Write(frames); err != nil {
		return err
	}
	resp, err := readZKFrame(c)
	if err != nil {
		return fmt.Errorf("connect response: %w", err)
	}
	if len(resp) < 16 {
		return errors.New("short connect response")
	}
	if int64(binary.BigEndian.Uint64(resp[8:])) != sid {
		return nil // the session has ended already
	}
	for {
		f, err := readZKFrame(c)
		if errors.Is(err, io.EOF) {
			return nil // the server closes the connection of a closed session
		}
		if err != nil {
			return fmt.Errorf("close reply: %w", err)
		}
		if len(f) >= replyHeaderLen && int32(binary.BigEndian.Uint32(f)) == xidOwnClose {
			return nil
		}
	}
}

// sessionTimeout is the negotiated session timeout (0 before the first handshake).
func (t *tap) sessionTimeout() time.Duration {
	return time.Duration(t.timeoutMs.Load()) * time.Millisecond
}

// replyTimeout is how long a request may wait for its reply before the connection is deemed
// dead: 2/3 of the session timeout, as go-zookeeper's own receive timeout.
func (t *tap) replyTimeout() time.Duration {
	if d := t.sessionTimeout() * 2 / 3; d > 0 {
		return d
	}
	return 10 * time.Second
}

// dropIfTimedOut closes go-zookeeper's connection if ctx ended at its deadline (a keep-alive
// sent at sent timed out) and the connection has by then waited at least half the call's time
// for a byte since it wrote one. A connection that went silent (its packets dropped with no
// reset: a failover, a lost NAT entry, a partition) was otherwise noticed only at the reply
// timeout, 2/3 of the session timeout after the keep-alive's request, and the retries of the
// keep-alive queued behind it on the same connection; the server expires a session a session
// timeout after the renewal before, one renewal interval earlier, so the session was lost in
// every such outage, even one of 300 ms. Closed, the connection's requests fail at once and
// go-zookeeper redials (see pacer): the engine's retry of the keep-alive (within 50 ms) goes
// out on the fresh connection with about a renewal interval (TTL/3, with the engine's
// defaults) of the session's time left. A connection that answers (it read since it wrote)
// is left alone, as is one whose handshake is still out (connectBound bounds that), and so is
// one that is only stalled for less than the keep-alive's time: checked halfway to the
// deadline instead (TTL/6 at TTL 1 s, 167 ms), a server or client busy for 200-400 ms cost a
// reconnect and the requests in flight, 10 times a minute with a stall every 2 s, and a
// reconnect gains nothing while the stall lasts (the fresh connection is stalled as well).
func (t *tap) dropIfTimedOut(ctx context.Context, sent time.Time) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.dropSilent(time.Since(sent) / 2)
	}
}

// dropSilent closes go-zookeeper's established connection if it has waited at least limit
// for a byte since it wrote one, and reports whether it did.
func (t *tap) dropSilent(limit time.Duration) bool {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil || !c.answered.Load() || c.broken.Load() {
		return false
	}
	since := c.waitingSince.Load()
	if since == 0 || time.Since(time.Unix(0, since)) < limit {
		return false
	}
	c.Conn.Close() // go-zookeeper's read fails: it drops the connection and redials
	return true
}

// credentials returns the bound session id and password.
func (t *tap) credentials() (int64, []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sid.Load(), append([]byte(nil), t.passwd...)
}

// takeCreated returns and forgets the czxid of the last successful create of path.
func (t *tap) takeCreated(path string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	z, ok := t.created[path]
	if ok {
		delete(t.created, path)
	}
	return z, ok
}

// opened returns the send time of the connect request that created the session: the server
// counts the session's first timeout from no earlier than that.
func (t *tap) opened() time.Duration { return time.Duration(t.openedAt.Load()) }

// handshake handles a connect response on c. It reports whether the response shows the bound
// session ended.
func (t *tap) handshake(c *tapConn, timeoutMs int32, sid int64, passwd []byte) (ended bool) {
	bound := t.sid.Load()
	switch {
	case sid == 0 || (bound != 0 && sid != bound):
		// The server no longer knows our session (expired or closed) or gave us another one.
		if bound != 0 {
			t.markGone()
		}
		return bound != 0
	case bound == 0:
		t.mu.Lock()
		t.passwd = append([]byte(nil), passwd...)
		t.mu.Unlock()
		t.openedAt.Store(int64(c.connectSent))
		t.sid.Store(sid)
	}
	t.timeoutMs.Store(timeoutMs)
	t.cut.Store(0)
	t.answered.Store(true)
	t.readyOnce.Do(func() { close(t.ready) })
	return false
}

// request records an outgoing request frame (header and the start of its body) and reports
// whether it is the only one awaiting a reply.
func (t *tap) request(c *tapConn, xid, op int32, body []byte) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != c {
		return false
	}
	t.outstanding++
	if op == opMulti && len(body) >= multiHeaderLen && int32(binary.BigEndian.Uint32(body)) == opCreate {
		// A multi-op whose first part is a create (a queue-checked acquire): its zxid, that of
		// its one transaction, is the created node's czxid.
		body = body[multiHeaderLen:]
		op = opCreate
	}
	if op == opCreate && len(body) >= 4 {
		n := int(binary.BigEndian.Uint32(body))
		// The prefix is compared, not taken with strings.HasPrefix, whose string conversion
		// of the path allocated.
		if p := body[4:]; n >= 0 && n <= len(p) && len(t.tokenRoot) <= n && string(p[:len(t.tokenRoot)]) == t.tokenRoot {
			if p = p[:n]; string(p) != t.lastCreate {
				t.lastCreate = string(p)
			}
			t.creates[xid] = t.lastCreate
		}
	}
	return t.outstanding == 1
}

// reply records an incoming reply header.
func (t *tap) reply(c *tapConn, xid int32, zxid int64, code int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if xid == t.closeXid && c == t.closeConn {
		t.settleCloseLocked(c, nil) // the server closed the session
	}
	if t.conn != c || xid < 0 {
		return
	}
	if t.outstanding > 0 {
		t.outstanding--
	}
	if path, ok := t.creates[xid]; ok {
		delete(t.creates, xid)
		if code == 0 {
			t.created[path] = zxid
		}
	}
}

// tapConn is one TCP connection of a tapped *zk.Conn.
type tapConn struct {
	net.Conn
	t *tap

	answered atomic.Bool // the connect response has been read
	// writing counts the Writes under way past the connect request (see tap.abandon).
	writing atomic.Int32
	// expired: the connect response said that the session is gone (read by Read's goroutine)
	expired bool
	broken  atomic.Bool // a read failed or the connection was closed: it carries no more
	// hsMu orders the write of the connect request against beginClose, which must find it
	// either written in full (and send its close behind it) or not (and stop it).
	hsMu       sync.Mutex
	connectOut bool // under hsMu: the connect request has been written

	// outgoing framing (Write is called from one goroutine at a time)
	out         []byte // partial frame
	outFrames   int
	connectSent time.Duration // when the connect request was written
	// hsDeadline bounds the wait for the connect response (see SetReadDeadline): the dial's
	// start plus its connectBound.
	hsDeadline time.Time
	// waitingSince is when the connection first wrote since it last read a byte (Unix
	// nanoseconds, 0: not waiting); see tap.dropIfTimedOut.
	waitingSince atomic.Int64
	// incoming framing (Read is called from one goroutine at a time)
	lenBuf   []byte // bytes of the current frame's length read so far
	haveLen  bool   // the current frame's length is known
	frameLen int    // length of the current frame
	head     []byte // header bytes of the current frame read so far, up to headNeed
	headNeed int
	skip     int // body bytes of the current frame still to pass
	inFrames int
}

// Write passes p through and parses the complete request frames it contains. A lone ping is
// dropped (reported as written), and so is everything once the tap is abandoned: a
// close-session request then closes the connection instead (see tap.abandon).
func (c *tapConn) Write(p []byte) (int, error) {
	if c.outFrames == 0 {
		return c.writeConnect(p)
	}
	c.writing.Add(1)
	defer c.writing.Add(-1)
	op, xid, whole := c.wholeRequest(p)
	if c.t.abandoned.Load() {
		if whole && op == opCloseSession {
			c.Close()
		}
		return len(p), nil
	}
	closeReq := false
	if whole {
		switch {
		case op == opPing && xid == xidPing,
			op == opCloseSession && c.t.abandoned.Load(): // abandoned since the check above
			return len(p), nil
		case op == opCloseSession:
			closeReq = true
		}
	}
	c.waitingSince.CompareAndSwap(0, time.Now().UnixNano())
	// Record before writing: the reply may be read before Write returns. If the write
	// fails, go-zookeeper drops the connection, and with it what was recorded for it.
	if closeReq {
		c.t.closeOn(c, xid)
	}
	c.parseOut(p)
	n, err := c.Conn.Write(p)
	switch {
	case closeReq && err == nil:
		c.t.closeSent.Store(true)
	case closeReq:
		c.t.closeNotOn(c)
	case err == nil && whole && op == opMulti && c.t.expecting.Load() > 0:
		c.t.releaseWritten(p)
	}
	return n, err
}

// wholeRequest reports whether p, written with nothing of an earlier request pending, is one
// whole request frame (go-zookeeper writes each request in one call), and its op and xid.
func (c *tapConn) wholeRequest(p []byte) (op, xid int32, whole bool) {
	if len(c.out) != 0 || len(p) < 12 || int(binary.BigEndian.Uint32(p)) != len(p)-4 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(p[8:])), int32(binary.BigEndian.Uint32(p[4:])), true
}

// writeConnect writes the connect request (go-zookeeper writes it whole, in one call), unless
// the session is being closed: the server would move the session to this connection, and
// from any connection closeAlone's close went over (see beginClose).
func (c *tapConn) writeConnect(p []byte) (int, error) {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	if c.t.closing.Load() {
		return 0, errSessionGone
	}
	c.parseOut(p)
	n, err := c.Conn.Write(p)
	c.connectOut = err == nil && c.outFrames > 0
	return n, err
}

// SetReadDeadline replaces go-zookeeper's receive timeout once the session is established:
// the read times out only while a request awaits its reply (pings are dropped, so an idle
// connection is silent and must not be taken for a dead one).
//
// During the handshake it bounds the wait for the connect response by the connection
// attempt's bound (connectBound, from the dial's start), and keeps that bound until the
// response is read. go-zookeeper waits ten times its receive timeout for the response's length
// (133 s for a 20 s session) and then clears the deadline for the rest of it, while every
// request queued meanwhile (a keep-alive) waits with it: a server that takes the connection
// but never answers (as a restarting ZooKeeper 3.8 was seen to do) blocked the session's calls
// for minutes instead of failing them until a reconnect that the server answers.
func (c *tapConn) SetReadDeadline(d time.Time) error {
	if c.inFrames == 0 { // the handshake
		if c.hsDeadline.IsZero() { // a connection the tap did not dial
			c.hsDeadline = time.Now().Add(c.t.connectBound())
		}
		if d.IsZero() || d.After(c.hsDeadline) {
			d = c.hsDeadline
		}
		return c.Conn.SetReadDeadline(d)
	}
	return c.armRead()
}

// SetWriteDeadline passes go-zookeeper's write deadlines on, but never shorter than the dial
// timeout: go-zookeeper derives them from the session timeout, which may be tiny.
func (c *tapConn) SetWriteDeadline(d time.Time) error {
	return c.Conn.SetWriteDeadline(c.floor(d))
}

// floor moves a non-zero deadline to at least the dial timeout from now.
func (c *tapConn) floor(d time.Time) time.Time {
	if d.IsZero() {
		return d
	}
	if min := time.Now().Add(c.t.dialTimeout); d.Before(min) {
		return min
	}
	return d
}

// armRead sets the read deadline from the requests awaiting replies (the tap's own close
// request among them); the check and the set happen under the tap's lock so that the reader
// and the writer cannot undo each other.
func (c *tapConn) armRead() error {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.t.conn == c && (c.t.outstanding > 0 || (c.t.closeConn == c && !c.t.closeSettled)) {
		return c.Conn.SetReadDeadline(time.Now().Add(c.t.replyTimeout()))
	}
	return c.Conn.SetReadDeadline(time.Time{})
}

func (c *tapConn) parseOut(p []byte) {
	if len(c.out) == 0 {
		// Fast path: go-zookeeper writes whole frames in one call.
		for len(p) >= 4 {
			n := int(binary.BigEndian.Uint32(p))
			if 4+n > len(p) {
				break
			}
			c.outFrame(p[4 : 4+n])
			p = p[4+n:]
		}
		if len(p) == 0 {
			return
		}
	}
	c.out = append(c.out, p...)
	for len(c.out) >= 4 {
		n := int(binary.BigEndian.Uint32(c.out))
		if 4+n > len(c.out) {
			return
		}
		c.outFrame(c.out[4 : 4+n])
		c.out = c.out[4+n:]
	}
	if len(c.out) == 0 {
		c.out = nil
	}
}

func (c *tapConn) outFrame(f []byte) {
	c.outFrames++
	if c.outFrames == 1 { // the connect request
		if c.t.now != nil {
			c.connectSent = c.t.now()
		}
		return
	}
	if len(f) < 8 {
		return
	}
	xid := int32(binary.BigEndian.Uint32(f))
	op := int32(binary.BigEndian.Uint32(f[4:]))
	if xid < 0 {
		return
	}
	if c.t.request(c, xid, op, f[8:]) {
		// A reply is now awaited: arm the read timeout of a reader that may be idle.
		c.armRead()
	}
}

// errCloseUnanswered is the outcome of a close request whose connection ended before the
// server answered it.
var errCloseUnanswered = errors.New("the connection ended before the server answered the close request")

// Close closes the connection.
func (c *tapConn) Close() error {
	c.broken.Store(true)
	c.t.settleClose(c, errCloseUnanswered)
	return c.Conn.Close()
}

// Read passes bytes through and parses the reply headers and the connect response.
//
// A connect response that says the session is gone ends go-zookeeper's use of the connection:
// it reports the session expired and dials anew (which the tap refuses), but never closes the
// connection, so the tap does once go-zookeeper has the whole response. Left open, it stayed
// in CLOSE-WAIT (the server closes its side) until a garbage collection finalized it: one
// descriptor for each expiry of a long-running program's sessions.
func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.waitingSince.Store(0)
		c.parseIn(p[:n])
	}
	if err != nil {
		c.broken.Store(true)
		c.t.settleClose(c, fmt.Errorf("%w: %w", errCloseUnanswered, err))
	}
	if c.expired && !c.haveLen && c.skip == 0 {
		// The response is read whole (go-zookeeper reads exactly its length).
		c.expired = false
		c.Close()
	}
	if err != nil && c.inFrames == 0 {
		// With TLS 1.3 a server that rejects the client's certificate says so after the
		// handshake, on the first read.
		c.t.noteTLS(err)
		switch {
		case isTimeout(err):
			c.t.cut.Add(1) // the attempt was given up at its bound
		case n == 0 && !c.haveLen && len(c.lenBuf) == 0 && !errors.Is(err, net.ErrClosed):
			// The server closed the connection before any byte of its connect response
			// (not this process: net.ErrClosed): it takes connections but does not serve,
			// a failed attempt as a refused dial is.
			c.t.attemptFailed(fmt.Errorf("%s closed the connection before answering the connect request: %w", c.RemoteAddr(), err))
		}
	}
	return n, err
}

// connectHeadLen is the part of a connect response the tap reads: protocol version,
// timeout, session id, password length and a password of up to 16 bytes.
const connectHeadLen = 4 + 4 + 8 + 4 + 16

func (c *tapConn) parseIn(p []byte) {
	for len(p) > 0 {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip -= k
			p = p[k:]
			continue
		}
		if !c.haveLen {
			k := min(4-len(c.lenBuf), len(p))
			c.lenBuf = append(c.lenBuf, p[:k]...)
			p = p[k:]
			if len(c.lenBuf) < 4 {
				continue
			}
			c.frameLen = int(binary.BigEndian.Uint32(c.lenBuf))
			c.lenBuf = c.lenBuf[:0]
			c.haveLen = true
			c.head = c.head[:0]
			c.headNeed = replyHeaderLen
			if c.inFrames == 0 {
				c.headNeed = connectHeadLen
			}
			c.headNeed = min(c.headNeed, c.frameLen)
		}
		k := min(c.headNeed-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
		if len(c.head) < c.headNeed {
			continue
		}
		c.frameIn(c.head)
		c.skip = c.frameLen - c.headNeed
		c.haveLen = false
	}
}

func (c *tapConn) frameIn(h []byte) {
	c.inFrames++
	if c.inFrames == 1 {
		defer c.answered.Store(true) // after handshake has checked the session
		if len(h) >= 20 {
			timeout := int32(binary.BigEndian.Uint32(h[4:]))
			sid := int64(binary.BigEndian.Uint64(h[8:]))
			pl := int(int32(binary.BigEndian.Uint32(h[16:])))
			var pw []byte
			if pl > 0 && 20+pl <= len(h) {
				pw = h[20 : 20+pl]
			}
			if c.t.handshake(c, timeout, sid, pw) {
				c.t.settleClose(c, nil) // the session had ended already
			}
			// go-zookeeper drops the connection of a response without a session (id 0).
			c.expired = sid == 0
		}
		return
	}
	if len(h) < replyHeaderLen {
		return
	}
	xid := int32(binary.BigEndian.Uint32(h))
	zxid := int64(binary.BigEndian.Uint64(h[4:]))
	code := int32(binary.BigEndian.Uint32(h[12:]))
	if xid == xidWatchEvent {
		return
	}
	c.t.reply(c, xid, zxid, code)
}
