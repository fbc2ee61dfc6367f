package zookeeper

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestOpenACLWarningGoesToEachLogger: a backend opened without credentials warns about the open
// ACL through the logger given with WithSlog — every such logger once, whatever backend warned
// before it — and a backend with credentials does not warn. (New does no I/O: no server is
// needed.)
func TestOpenACLWarningGoesToEachLogger(t *testing.T) {
	const warning = "open ACL world:anyone"
	newLogger := func() (*slog.Logger, *bytes.Buffer) {
		var buf bytes.Buffer
		return slog.New(slog.NewTextHandler(&buf, nil)), &buf
	}
	first, firstBuf := newLogger()
	second, secondBuf := newLogger()
	withCreds, credsBuf := newLogger()
	for _, o := range []struct {
		dsn string
		log *slog.Logger
	}{
		{"zk://127.0.0.1:2181/acl-a", first},
		{"zk://127.0.0.1:2181/acl-b", second},
		{"zk://127.0.0.1:2181/acl-c", first}, // the same logger again: not twice
		{"zk://u:s3cr3t@127.0.0.1:2181/acl-d", withCreds},
	} {
		b, err := New(o.dsn, WithSlog(o.log))
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if n := strings.Count(firstBuf.String(), warning); n != 1 {
		t.Errorf("first logger got the open-ACL warning %d times, want once:\n%s", n, firstBuf)
	}
	if n := strings.Count(secondBuf.String(), warning); n != 1 {
		t.Errorf("second logger got the open-ACL warning %d times, want once:\n%s", n, secondBuf)
	}
	if !strings.Contains(firstBuf.String(), "level=WARN") {
		t.Errorf("the warning is not at WARN level:\n%s", firstBuf)
	}
	if credsBuf.Len() != 0 {
		t.Errorf("a backend with credentials logged:\n%s", credsBuf)
	}
}
