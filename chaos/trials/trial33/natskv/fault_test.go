//go:build trial33

package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/simba-go/simba/chaos/servers"
	"github.com/simba-go/simba/chaos/trials/trial33/natskv"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// privateNATS is a nats-server with JetStream (file storage in a directory of its own) on a
// spare port, which the test may kill and start again.
type privateNATS struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

func startNATS(t testing.TB) *privateNATS {
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &privateNATS{t: t, port: port, dir: t.TempDir()}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *privateNATS) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", p.port) }

func (p *privateNATS) start() {
	p.t.Helper()
	p.cmd = exec.Command("nats-server", "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(p.port), "-sd", p.dir)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("nats-server on %d did not start: %v", p.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *privateNATS) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// FencingSpec with Restart: a file-storage bucket keeps its lease records across a SIGKILL and
// restart of the server, so tokens keep growing.
func TestFencingAcrossServerRestarts(t *testing.T) {
	if _, err := exec.LookPath("nats-server"); err != nil {
		t.Fatal("nats-server not on PATH")
	}
	p := startNATS(t)
	open := func(t testing.TB) spi.Backend {
		b, err := natskv.OpenStorage(context.Background(), p.url(), "simba", jetstream.FileStorage)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tck.FencingSpec(t, tck.Factory{
		NewBackend:     func(t testing.TB, _ tck.BackendConfig) spi.Backend { return open(t) },
		Restart:        func(testing.TB) { p.kill(); p.start() },
		PersistsTokens: true,
		MinTTL:         300 * time.Millisecond,
	})
}

// A call made while the server is down fails retryable (spi.ErrUnavailable); once the server
// is back (within the TTL) the same backend reconnects and the session lives on.
func TestOutageIsRetryable(t *testing.T) {
	p := startNATS(t)
	ctx := context.Background()
	b, err := natskv.OpenStorage(ctx, p.url(), "simba", jetstream.FileStorage)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.OpenSession(ctx, "owner", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.kill()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = b.KeepAlive(cctx, s.ID, nil, nil)
	cancel()
	if err == nil || spi.Classify(err) != spi.Retryable || !errors.Is(err, spi.ErrUnavailable) {
		t.Fatalf("KeepAlive with the server down: %v (class %v), want retryable ErrUnavailable", err, spi.Classify(err))
	}
	t.Logf("KeepAlive with the server down: %v", err)
	p.start()
	var ka spi.KeepAlive
	for deadline := time.Now().Add(15 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		ka, err = b.KeepAlive(cctx, s.ID, nil, nil)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || ka.Expired {
		t.Fatalf("KeepAlive after the server came back: %+v, %v", ka, err)
	}
	fmt.Fprintln(os.Stderr, "session survived the restart; remaining", ka.Remaining)
}
