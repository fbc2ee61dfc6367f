package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// openSessionErr opens a backend on dsn, opens a session (closing it again) and returns the
// session's error.
func openSessionErr(t *testing.T, ctx context.Context, dsn string) error {
	t.Helper()
	b, err := Open(dsn, WithLogger(discard))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	s, err := b.OpenSession(ctx, "o", time.Minute)
	if err == nil {
		_ = b.CloseSession(ctx, s.ID)
	}
	return err
}

// wantDenied checks that err is a permanent spi.ErrAccessDenied (ErrAuth too when auth) whose
// message contains each of says and not the password pw.
func wantDenied(t *testing.T, what string, err error, auth bool, pw string, says ...string) {
	t.Helper()
	msg := fmtErr(err)
	ok := errors.Is(err, spi.ErrAccessDenied) && spi.Classify(err) == spi.Permanent &&
		errors.Is(err, ErrAuth) == auth && (pw == "" || !strings.Contains(msg, pw))
	for _, s := range says {
		ok = ok && strings.Contains(msg, s)
	}
	if !ok {
		t.Errorf("%s: %v; want a permanent spi.ErrAccessDenied (ErrAuth: %v) saying %q", what, err, auth, says)
	}
}

// TestAccessDeniedACL: at a private server with ACL users, a wrong password and an unknown user
// are refused with a permanent error matching spi.ErrAccessDenied and ErrAuth that names the
// user and the server; an ACL user without Simba's keys, or without EVALSHA, is refused with
// one matching spi.ErrAccessDenied (a privilege, not ErrAuth) that says so. On the old code
// NOPERM and WRONGPASS were permanent but matched no common sentinel.
func TestAccessDeniedACL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := startPrivServer(t,
		"user default on nopass ~* &* +@all",
		"user app on >right ~simba:* &simba:* +@all",
		"user nokeys on >right ~other:* &* +@all",
		"user noeval on >right ~* &* +@all -evalsha -eval")
	addr := "127.0.0.1:" + strconv.Itoa(port)

	wantDenied(t, "wrong password", openSessionErr(t, ctx, "redis://app:bad-secret@"+addr), true, "bad-secret",
		`"app"`, addr, "refused the credentials")
	wantDenied(t, "unknown user", openSessionErr(t, ctx, "redis://nobody:right@"+addr), true, "",
		`"nobody"`, addr)
	wantDenied(t, "no keys", openSessionErr(t, ctx, "redis://nokeys:right@"+addr), false, "",
		"privilege refused", `"nokeys"`, addr, "NOPERM")
	wantDenied(t, "no evalsha", openSessionErr(t, ctx, "redis://noeval:right@"+addr), false, "",
		"privilege refused", `"noeval"`, addr, "NOPERM")
	if err := openSessionErr(t, ctx, "redis://app:right@"+addr); err != nil {
		t.Errorf("the right password: %v", err)
	}
}

// TestAccessDeniedCluster: a private Redis Cluster of 3 masters (no replicas) with a password
// (requirepass, masterauth): a wrong password, and none, fail the first OpenSession with a
// permanent error matching spi.ErrAccessDenied and ErrAuth; the right one opens a session (the
// password path of the Cluster client). On the old code the errors matched ErrAuth only.
func TestAccessDeniedCluster(t *testing.T) {
	testenv.Short(t, "starts a private Redis Cluster")
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, "redis-server and redis-cli", err.Error())
		}
	}
	goredis.SetLogger(quiet{})
	const pw = "cluster-secret"
	pc := startPrivClusterPassword(t, pw)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var addrs []string
	for _, p := range pc.ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	seeds := strings.Join(addrs, ",")
	wantDenied(t, "wrong password", openSessionErr(t, ctx, "redis+cluster://:bad-secret@"+seeds), true, "bad-secret",
		`"default"`, addrs[0])
	wantDenied(t, "no password", openSessionErr(t, ctx, "redis+cluster://"+seeds), true, "",
		"requires authentication")
	if err := openSessionErr(t, ctx, "redis+cluster://:"+pw+"@"+seeds); err != nil {
		t.Errorf("the right password: %v", err)
	}
}

// startPrivClusterPassword starts a Redis Cluster of 3 masters without replicas on ports it
// picks (privPorts), every node with requirepass and masterauth pw; killed when the test ends.
func startPrivClusterPassword(t *testing.T, pw string) *privCluster {
	t.Helper()
	root := t.TempDir() // before the servers' cleanup: see startPrivCluster
	pc := &privCluster{t: t, procs: map[int]*privProc{}, confs: map[int]string{}, logs: map[int]string{}}
	t.Cleanup(pc.stop)
	for attempt := 1; ; attempt++ {
		pc.ports = privPorts(t, 3, true)
		for _, p := range pc.ports {
			dir := fmt.Sprintf("%s/%d", root, p)
			conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ncluster-enabled yes\ncluster-config-file nodes.conf\n"+
				"cluster-node-timeout 1000\nsave \"\"\nappendonly no\ndir %s\nlogfile %s/redis.log\nrequirepass %s\nmasterauth %s\n",
				p, dir, dir, pw, pw)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			cf := dir + "/redis.conf"
			if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			pc.confs[p], pc.logs[p] = cf, dir+"/redis.log"
			pc.start(p)
		}
		err := pc.waitAllReady()
		if err == nil {
			break
		}
		pc.stop()
		if attempt == privAttempts {
			t.Fatalf("the private Redis Cluster did not start in %d attempts: %v", attempt, err)
		}
	}
	args := []string{"-a", pw, "--no-auth-warning", "--cluster", "create"}
	for _, p := range pc.ports {
		args = append(args, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pc.ports {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p), Password: pw})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("the private Redis Cluster is not ok within 30 s: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return pc
}
