package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/printable"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// The private servers of these tests are on ports they pick (startPrivServerProc).
const (
	privTestTTL    = time.Minute
	junkValueBytes = 8 << 10
)

// privClient is a plain client of the private server on port, closed when the test ends.
func privClient(t *testing.T, port int, user, pass string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), Username: user, Password: pass})
	t.Cleanup(func() { c.Close() })
	return c
}

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)

func capture() (*testenv.LogBuffer, *slog.Logger) {
	lb := &testenv.LogBuffer{}
	return lb, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// grantsThenLoses grants name to two sessions in turn (releasing in between) and returns the
// greatest token granted.
func grantsThenLoses(t *testing.T, b *Backend, name string) int64 {
	t.Helper()
	ctx := context.Background()
	var last int64
	for i := range 3 {
		s := open(t, b, privTestTTL)
		r, err := b.Acquire(ctx, s, name)
		if err != nil || r.Kind != spi.Granted || r.Token <= last {
			t.Fatalf("grant %d: %+v %v, want a token > %d", i, r, err, last)
		}
		last = r.Token
		if i < 2 {
			if err := b.Release(ctx, s, name, r.Token); err != nil {
				t.Fatal(err)
			}
		}
	}
	return last
}

// TestTokensSurviveEviction: with maxmemory-policy allkeys-lru and a tiny maxmemory, filling the
// server with junk evicts the lease hash (the token counter with it); the next grant's token is
// still greater than every token granted before (the µs clock floor), where it used to restart
// at 1.
func TestTokensSurviveEviction(t *testing.T) {
	_, portEvict := startPrivServerProc(t, "maxmemory-policy allkeys-lru")
	ctx := context.Background()
	c := privClient(t, portEvict, "", "")
	b := newBackend(t, c, WithLogger(discard))
	const name = "evict.me"
	last := grantsThenLoses(t, b, name)

	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used, err := strconv.ParseInt(infoFields(info)["used_memory"], 10, 64)
	if err != nil {
		t.Fatalf("used_memory in %q: %v", info, err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+(2<<20), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	junk := strings.Repeat("x", junkValueBytes)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		n, err := c.Exists(ctx, wire.LeaseKey(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Logf("the lease hash was evicted after %d junk keys", i*50)
			break
		}
		if time.Now().After(deadline) || i > 20000 {
			t.Fatalf("the lease hash survived %d junk keys: no eviction, the test proves nothing", i*50)
		}
		pipe := c.Pipeline()
		for j := range 50 {
			pipe.Set(ctx, fmt.Sprintf("junk:%d:%d", i, j), junk, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, b, privTestTTL)
	r, err := b.Acquire(ctx, s, name)
	if err != nil || r.Kind != spi.Granted || r.Token <= last {
		t.Fatalf("grant after the eviction: %+v %v, want a token > %d", r, err, last)
	}
}

// TestTokensSurviveRestart: a server without persistence (save "", appendonly no) restarts with
// every lease hash gone; the next grant's token is still greater than every token granted
// before the restart.
func TestTokensSurviveRestart(t *testing.T) {
	pc, portRestart := startPrivServerProc(t, `save ""`, "appendonly no")
	ctx := context.Background()
	c := privClient(t, portRestart, "", "")
	b := newBackend(t, c, WithLogger(discard))
	const name = "restart.me"
	last := grantsThenLoses(t, b, name) // the last tenure is still held when the server dies

	pc.kill(portRestart)
	pc.start(portRestart)
	pc.waitPort(portRestart)
	var n int64
	var err error
	for range 20 { // the pool's connections died with the server: go-redis redials
		if n, err = c.Exists(ctx, wire.LeaseKey(name)).Result(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || n != 0 {
		t.Fatalf("after the restart: EXISTS %d, %v; want the lease hash gone", n, err)
	}
	s := open(t, b, privTestTTL)
	r, err := b.Acquire(ctx, s, name)
	if err != nil || r.Kind != spi.Granted || r.Token <= last {
		t.Fatalf("grant after the restart: %+v %v, want a token > %d", r, err, last)
	}
}

// TestStrictDurabilityFromDSN: strict_durability=true in the DSN is WithStrictDurability: at a
// server without AOF the first OpenSession of a backend Open made fails with a permanent
// ErrNotDurable, where without it (or with strict_durability=false) the session opens (and the
// backend only warns).
func TestStrictDurabilityFromDSN(t *testing.T) {
	ctx := context.Background()
	_, port := startPrivServerProc(t, "maxmemory-policy noeviction", "appendonly no")
	addr := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	for _, tc := range []struct {
		query  string
		strict bool
	}{{"?strict_durability=true", true}, {"?strict_durability=false", false}, {"", false}} {
		lb, log := capture()
		b, err := Open(addr+tc.query, WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.OpenSession(ctx, "strict-dsn", privTestTTL)
		switch {
		case tc.strict && (!errors.Is(err, ErrNotDurable) || spi.Classify(err) != spi.Permanent):
			t.Errorf("%s: OpenSession at a server without AOF: %v, want a permanent ErrNotDurable", tc.query, err)
		case tc.strict && (!strings.Contains(err.Error(), "appendonly no") || strings.Contains(err.Error(), "refuse such a server") || lb.String() != ""):
			// Refused, it is told why, not how to refuse, and not warned as well.
			t.Errorf("%s: error %q (want it to name appendonly no, without the hint to refuse such a server), log %q (want none)", tc.query, err, lb.String())
		case !tc.strict && err != nil:
			t.Errorf("%q: OpenSession: %v, want a session (and a warning)", tc.query, err)
		case !tc.strict:
			if !strings.Contains(lb.String(), "strict_durability=true") || !strings.Contains(lb.String(), "WithStrictDurability") {
				t.Errorf("%q: the warning %q does not name both ways to refuse such a server", tc.query, lb.String())
			}
			if err := b.CloseSession(ctx, s.ID); err != nil {
				t.Error(err)
			}
		}
		b.Close()
	}
}

// TestDurabilityCheck: at the first OpenSession the backend reads maxmemory-policy and
// appendonly and warns through its logger when lease hashes could be lost (allkeys-lru, no
// AOF; read by INFO where CONFIG is refused or renamed away), or when CONFIG and INFO are both
// refused; WithStrictDurability refuses with a permanent
// ErrNotDurable instead. A server with AOF and noeviction gets no warning.
func TestDurabilityCheck(t *testing.T) {
	ctx := context.Background()
	_, portUndurable := startPrivServerProc(t, "maxmemory-policy allkeys-lru", "appendonly no",
		"user default on nopass ~* &* +@all",
		"user infoonly on >pw ~* &* +@all -config",
		"user blind on >pw ~* &* +@all -config -info")
	_, portDurable := startPrivServerProc(t, "maxmemory-policy noeviction", "appendonly yes")
	_, portRenamed := startPrivServerProc(t, "maxmemory-policy allkeys-lfu", `rename-command CONFIG ""`)

	for _, tc := range []struct {
		name, user string
		want       []string // in the warning
	}{
		{"config", "", []string{"level=WARN", "allkeys-lru", "appendonly no", "evicts", "restart", "mutual exclusion breaks", "renewal interval", "fencing tokens", "clock", "strict_durability=true", "WithStrictDurability"}},
		{"info fallback", "infoonly", []string{"level=WARN", "allkeys-lru", "appendonly no", "mutual exclusion breaks"}},
		{"refused", "blind", []string{"level=WARN", "could not read the settings", "NOPERM", "mutual exclusion breaks", "clock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass := ""
			if tc.user != "" {
				pass = "pw"
			}
			lb, log := capture()
			b := newBackend(t, privClient(t, portUndurable, tc.user, pass), WithLogger(log))
			open(t, b, privTestTTL)
			open(t, b, privTestTTL) // warned once, not per session
			out := lb.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("warning %q lacks %q", out, w)
				}
			}
			if n := strings.Count(out, "level=WARN"); n != 1 || strings.Count(out, "\n") != 1 {
				t.Errorf("%d warnings, want 1 of one line: %s", n, out)
			}
			checkWarningMessage(t, out)
			strict := newBackend(t, privClient(t, portUndurable, tc.user, pass), WithLogger(discard), WithStrictDurability())
			_, err := strict.OpenSession(ctx, "strict", privTestTTL)
			if !errors.Is(err, ErrNotDurable) || spi.Classify(err) != spi.Permanent {
				t.Fatalf("strict OpenSession: %v, want a permanent ErrNotDurable", err)
			}
			if _, again := strict.OpenSession(ctx, "strict", privTestTTL); !errors.Is(again, ErrNotDurable) {
				t.Fatalf("second strict OpenSession: %v, want ErrNotDurable again", again)
			}
		})
	}
	t.Run("CONFIG renamed away", func(t *testing.T) {
		lb, log := capture()
		b := newBackend(t, privClient(t, portRenamed, "", ""), WithLogger(log))
		open(t, b, privTestTTL)
		if out := lb.String(); !strings.Contains(out, "allkeys-lfu") || strings.Count(out, "level=WARN") != 1 {
			t.Fatalf("warning %q, want one naming allkeys-lfu (read by INFO)", out)
		}
	})
	t.Run("durable", func(t *testing.T) {
		lb, log := capture()
		b := newBackend(t, privClient(t, portDurable, "", ""), WithLogger(log))
		open(t, b, privTestTTL)
		if out := lb.String(); out != "" {
			t.Fatalf("logged %q for a server with AOF and noeviction", out)
		}
		ds, err := b.CheckDurability(ctx)
		if err != nil || len(ds) != 1 || !ds[0].Safe() || ds[0].Policy != "noeviction" || !ds[0].AppendOnly {
			t.Fatalf("CheckDurability: %+v %v", ds, err)
		}
		strict := newBackend(t, privClient(t, portDurable, "", ""), WithLogger(log), WithStrictDurability())
		open(t, strict, privTestTTL)
	})
	t.Run("cluster checks every master", func(t *testing.T) {
		cc := clusterClient(t)
		b := newBackend(t, cc, WithLogger(discard))
		ds, err := b.CheckDurability(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int32 // ForEachMaster runs the callbacks concurrently
		if err := cc.ForEachMaster(ctx, func(context.Context, *goredis.Client) error { n.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		masters := int(n.Load())
		seen := map[string]bool{}
		for _, d := range ds {
			if !d.Checked || d.Addr == "" {
				t.Errorf("master %+v not checked", d)
			}
			seen[d.Addr] = true
		}
		if len(ds) != masters || len(seen) != masters {
			t.Fatalf("checked %d servers (%v), want each of the %d masters", len(ds), seen, masters)
		}
	})
}

// maxWarning is the longest message (slog's msg) of a durability warning: a line a user reads
// to the end; its details are the warning's attributes (the message was 560 to 720 characters,
// all of them on one line, before 2026-12-05).
const maxWarning = 260

// checkWarningMessage fails t unless the message of the durability warning in the text log out
// is short (maxWarning), says what is at risk (two sessions holding one lease) and gives both
// fixes: the setting to change and strict_durability=true / WithStrictDurability.
func checkWarningMessage(t *testing.T, out string) {
	t.Helper()
	_, rest, ok := strings.Cut(out, ` msg="`)
	msg, _, ok2 := strings.Cut(rest, `" `)
	if !ok || !ok2 {
		t.Fatalf("no message in %q", out)
	}
	msg = strings.ReplaceAll(msg, `\"`, `"`)
	checkShortAdvice(t, msg, true)
}

// checkShortAdvice fails t unless msg is at most maxWarning characters and names the risk and
// the fix, and, if refusal, the two ways to refuse such a server.
func checkShortAdvice(t *testing.T, msg string, refusal bool) {
	t.Helper()
	if len(msg) > maxWarning {
		t.Errorf("message of %d characters, want at most %d: %s", len(msg), maxWarning, msg)
	}
	want := []string{"two sessions can hold one lease", "set "}
	if strings.Contains(msg, "could not read") {
		want = []string{"two sessions can hold one lease", "appendonly yes"}
	}
	if refusal {
		want = append(want, "strict_durability=true", "WithStrictDurability")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
	if !refusal && strings.Contains(msg, "refuse") {
		t.Errorf("message %q tells how to refuse a server it refuses", msg)
	}
}

// TestDurabilityString: every finding that is not safe is one short line (the warning's
// message) that names the setting, says two sessions can then hold one lease and what to
// change, or how to refuse such a server; the strict error's text (describe("")) says the
// same without the refusal. The full risk is the warning's risk attribute (logAttrs): mutual
// exclusion breaks, for how long, and fencing tokens are what protects the resource then. A
// safe finding says nothing is at risk.
func TestDurabilityString(t *testing.T) {
	for _, tc := range []struct {
		d    Durability
		want []string
	}{
		{Durability{Addr: "h:1", Checked: true, Policy: "noeviction", LosesOnRestart: true},
			[]string{"at h:1", "appendonly no", "restart", "appendonly yes"}},
		{Durability{Checked: true, Policy: "allkeys-lru", MaxMemory: "100", EvictsLeases: true},
			[]string{"allkeys-lru", "eviction", "noeviction"}},
		{Durability{Checked: true, Policy: "allkeys-lfu", MaxMemory: "100", EvictsLeases: true, LosesOnRestart: true},
			[]string{"allkeys-lfu", "eviction", "restart", "appendonly yes"}},
		{Durability{Err: errors.New("NOPERM\nsecond line")},
			[]string{"could not read the settings", "appendonly yes"}},
	} {
		got := tc.d.String()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: %q lacks %q", tc.d, got, w)
			}
		}
		checkShortAdvice(t, got, true)
		checkShortAdvice(t, tc.d.describe(""), false)
		attrs := fmt.Sprint(tc.d.logAttrs()...)
		for _, w := range []string{"mutual exclusion breaks", "renewal interval", "only fencing tokens protect"} {
			if !strings.Contains(attrs, w) {
				t.Errorf("%+v: attributes %q lack %q", tc.d, attrs, w)
			}
		}
		if tc.d.Safe() {
			t.Errorf("%+v is Safe", tc.d)
		}
		if strings.ContainsAny(got, "\r\n") {
			t.Errorf("%+v: %q is not one line", tc.d, got)
		}
	}
	safe := Durability{Checked: true, Policy: "noeviction", AppendOnly: true}
	if got := safe.String(); !safe.Safe() || strings.Contains(got, "breaks") {
		t.Errorf("safe finding: %q", got)
	}
}

// TestTokenOverflowAndCorruptTokens: a lease hash whose token is at or above 2^53 - 1 (no exact
// successor in Lua's doubles) gives a permanent ErrTokenOverflow, one whose token is not a plain
// decimal ("0x10", "-5", "abc", ...) a permanent ErrCorruptToken, on standalone and Cluster
// backends; nothing is written.
func TestTokenOverflowAndCorruptTokens(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		stored string
		want   error
	}{
		{"9007199254740991", spi.ErrTokenOverflow}, // 2^53 - 1
		{"9007199254740992", spi.ErrTokenOverflow}, // 2^53
		{"9007199254740993", spi.ErrTokenOverflow},
		{"9223372036854775807", spi.ErrTokenOverflow},
		{"0x10", spi.ErrCorruptToken},
		{"-5", spi.ErrCorruptToken},
		{"abc", spi.ErrCorruptToken},
		{"1.5", spi.ErrCorruptToken},
		{"1e3", spi.ErrCorruptToken},
		// Terminal escape sequences and a bidirectional override, which the script quotes as
		// they are: the error shows them escaped (mends5; they reached the text raw before).
		{"\x1b[2J\x1b]0;owned\x07", spi.ErrCorruptToken},
		{"7\u202e", spi.ErrCorruptToken},
	}
	for _, mode := range []struct {
		name string
		c    func(t testing.TB) goredis.UniversalClient
	}{
		{"standalone", func(t testing.TB) goredis.UniversalClient { return standaloneClient(t) }},
		{"cluster", func(t testing.TB) goredis.UniversalClient { return clusterClient(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := mode.c(t)
			b := newBackend(t, c, WithLogger(discard))
			s := open(t, b, privTestTTL)
			for _, tc := range cases {
				name := "tokens." + strconv.FormatInt(time.Now().UnixNano(), 36)
				key := wire.LeaseKey(name)
				if err := c.HSet(ctx, key, wire.LeaseFieldToken, tc.stored).Err(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Del(context.Background(), key) })
				r, err := b.Acquire(ctx, s, name)
				if !errors.Is(err, tc.want) || spi.Classify(err) != spi.Permanent {
					t.Fatalf("stored %q: %+v, %v; want a permanent %v", tc.stored, r, err, tc.want)
				}
				if msg := err.Error(); printable.Escape(msg) != msg {
					t.Errorf("stored %q: the error's text carries it raw: %q", tc.stored, msg)
				}
				if h, err := c.HGetAll(ctx, key).Result(); err != nil || len(h) != 1 || h[wire.LeaseFieldToken] != tc.stored {
					t.Fatalf("stored %q: the refused acquire wrote %v (%v)", tc.stored, h, err)
				}
			}
		})
	}
}

// TestDurabilityWarningAsQuoted: the warning that the package doc and the README quote is the
// one a default Redis (appendonly no) gets.
func TestDurabilityWarningAsQuoted(t *testing.T) {
	got := Durability{Addr: "127.0.0.1:6379", Checked: true, Policy: "noeviction", MaxMemory: "0", LosesOnRestart: true}.String()
	for _, file := range []string{"doc.go", "../../README.md"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		flat := strings.Join(strings.Fields(strings.ReplaceAll(string(text), "\n//", "\n")), " ")
		if !strings.Contains(flat, got) {
			t.Errorf("%s does not quote the warning %q", file, got)
		}
	}
}
