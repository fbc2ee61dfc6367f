package zookeeper

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestOpenACLWarningGoesToEachLogger: a backend opened without credentials warns about the open
// ACL, saying to put a user:password in the DSN, through the logger given with WithSlog at its
// first OpenSession — every such logger once, whatever backend warned before it — and not
// before: a backend that only reads (Inspect, as simba status does) creates no node and does
// not warn. A backend with credentials does not warn.
func TestOpenACLWarningGoesToEachLogger(t *testing.T) {
	const warning = "open ACL world:anyone"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newLogger := func() (*slog.Logger, *bytes.Buffer) {
		var buf bytes.Buffer
		return slog.New(slog.NewTextHandler(&buf, nil)), &buf
	}
	first, firstBuf := newLogger()
	second, secondBuf := newLogger()
	withCreds, credsBuf := newLogger()
	reader, readerBuf := newLogger()
	b := openBackend(t, serverDSN(t, ""), WithSlog(reader))
	if _, err := b.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	if readerBuf.Len() != 0 {
		t.Errorf("a backend that only inspected logged:\n%s", readerBuf)
	}
	for _, o := range []struct {
		dsn string
		log *slog.Logger
	}{
		{serverDSN(t, ""), first},
		{serverDSN(t, ""), second},
		{serverDSN(t, ""), first}, // the same logger again: not twice
		{serverChroot(t).DSN("u:s3cr3t", ""), withCreds},
	} {
		b := openBackend(t, o.dsn, WithSlog(o.log))
		s, err := b.OpenSession(ctx, "acl-warning", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CloseSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(firstBuf.String(), warning); n != 1 {
		t.Errorf("first logger got the open-ACL warning %d times, want once:\n%s", n, firstBuf)
	}
	if n := strings.Count(secondBuf.String(), warning); n != 1 {
		t.Errorf("second logger got the open-ACL warning %d times, want once:\n%s", n, secondBuf)
	}
	if !strings.Contains(firstBuf.String(), "level=WARN") || !strings.Contains(firstBuf.String(), "put a user:password in the DSN") {
		t.Errorf("the warning is not at WARN level or does not say what to do:\n%s", firstBuf)
	}
	if credsBuf.Len() != 0 {
		t.Errorf("a backend with credentials logged:\n%s", credsBuf)
	}
	if !strings.Contains(firstBuf.String(), "add ?acl=open to say the open ACL is intended") {
		t.Errorf("the warning does not say how to acknowledge an intended open ACL:\n%s", firstBuf)
	}
}

// TestOpenACLAcknowledged: a DSN with acl=open (Config.OpenACL) says the open ACL is intended:
// the backend logs no WARN about it (a simba lock that cron starts every minute logged one
// every minute), and says it at the debug level only, where the security message stays
// available. Old code: acl=open was refused as an unknown parameter.
func TestOpenACLAcknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		b := openBackend(t, serverDSN(t, "acl=open"), WithSlog(log))
		s, err := b.OpenSession(ctx, "acl-open", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CloseSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "level=WARN") {
			t.Errorf("at %v, a backend with acl=open warned:\n%s", level, out)
		}
		if got, want := strings.Contains(out, "open ACL world:anyone"), level == slog.LevelDebug; got != want {
			t.Errorf("at %v, the open ACL said: %v, want %v:\n%s", level, got, want, out)
		}
	}
}
