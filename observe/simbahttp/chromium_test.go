package simbahttp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/spi"
)

// The test binary doubles as a node of the three-process election: with SIMBAHTTP_NODE set it
// runs one client with its status handler instead of the tests.
func TestMain(m *testing.M) {
	if owner := os.Getenv("SIMBAHTTP_NODE"); owner != "" {
		if err := runNode(owner, os.Getenv("SIMBAHTTP_DSN")); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runNode runs one node: a client on the SQLite file in an election, its handler on a free
// port (printed as "addr HOST:PORT"), until its standard input closes.
func runNode(owner, dsn string) error {
	ctx := context.Background()
	b, err := simbasql.Open(ctx, dsn, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer b.Close()
	h := simbahttp.New(simbahttp.Opts{Backend: b, Title: "Simba · election demo"})
	c, err := simba.New(b, append(h.Options(), simba.WithOwner(owner), simba.WithTTL(3*time.Second))...)
	if err != nil {
		return err
	}
	h.Attach(c)
	e, err := c.NewElection("leader")
	if err != nil {
		return err
	}
	h.Track(e)
	if err := e.Start(ctx); err != nil {
		return err
	}
	g, err := c.JoinGroup(ctx, "shards", 4)
	if err != nil {
		return err
	}
	h.Track(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, h)
	fmt.Printf("addr %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return c.Close(ctx)
}

// chromium finds Debian's chromium; without it the test fails under SIMBA_REQUIRE_SERVICES=1
// (CI, where .ci/services.sh installs it) and is skipped otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "Chromium", "no chromium on PATH (install Debian's chromium package: bash .ci/services.sh)")
	return "" // not reached: Unavailable fails or skips the test
}

// browse runs headless Chromium on url with args (--dump-dom, --screenshot=...) and returns
// its standard output.
func browse(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

type proc struct {
	owner string
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startProc(t *testing.T, owner, dsn string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SIMBAHTTP_NODE="+owner, "SIMBAHTTP_DSN="+dsn)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{owner: owner, cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("node %s: %v", owner, err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if !ok {
		t.Fatalf("node %s said %q", owner, line)
	}
	p.addr = addr
	return p
}

var holderRow = regexp.MustCompile(`<tr class="holder" data-name="leader" data-holder="([^"]*)" data-token="(\d+)" data-self="(true|false)">`)

// shownHolder reads the holder and token of "leader" from the page's DOM as Chromium built it.
func shownHolder(t *testing.T, dom string) (string, int64, bool) {
	t.Helper()
	m := holderRow.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no holder of leader in the page:\n%s", dom)
	}
	tok, _ := strconv.ParseInt(m[2], 10, 64)
	return m[1], tok, m[3] == "true"
}

// Three processes run an election on one SQLite file, each serving the status page. Headless
// Chromium loads a follower's page: it shows the holder and token the backend has. The leader
// is SIGKILLed; once another process holds the lease, the page shows the new holder with the
// greater token, and its timeline both terms. SIMBA_UPDATE_SCREENSHOT=1 writes the page's
// screenshot to docs/status-page.png (the README's).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
	watch, err := simbasql.Open(ctx, dsn, simbasql.WithAutoMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	procs := map[string]*proc{}
	for _, owner := range []string{"node-a", "node-b", "node-c"} {
		procs[owner] = startProc(t, owner, dsn)
	}

	// holder waits until the backend shows a holder of leader other than not, by its Inspector.
	holder := func(not string) spi.LeaseInfo {
		var li spi.LeaseInfo
		until(t, "a holder of leader other than "+not, 30*time.Second, func() bool {
			snap, err := watch.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range snap.Leases {
				if l.Name == "leader" && l.Holder != "" && l.Owner != not {
					li = l
					return true
				}
			}
			return false
		})
		return li
	}
	first := holder("")
	var viewer *proc // a follower, whose page we load
	for _, owner := range []string{"node-a", "node-b", "node-c"} {
		if owner != first.Owner {
			viewer = procs[owner]
			break
		}
	}
	url := "http://" + viewer.addr + "/"
	dom := browse(t, bin, url, "--dump-dom")
	who, tok, self := shownHolder(t, dom)
	if who != first.Owner || tok != first.Token || self {
		t.Fatalf("%s's page shows %s #%d (self %v); the backend has %s #%d", viewer.owner, who, tok, self,
			first.Owner, first.Token)
	}
	t.Logf("%s's page shows %s #%d", viewer.owner, who, tok)

	// Fail over: the leader dies without a goodbye; its session expires after one TTL.
	if err := procs[first.Owner].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := holder(first.Owner)
	if second.Token <= first.Token {
		t.Fatalf("new token %d not greater than %d", second.Token, first.Token)
	}
	dom = browse(t, bin, url, "--dump-dom")
	who, tok, self = shownHolder(t, dom)
	if who != second.Owner || tok != second.Token || self != (viewer.owner == second.Owner) {
		t.Fatalf("%s's page shows %s #%d (self %v); the backend has %s #%d", viewer.owner, who, tok, self,
			second.Owner, second.Token)
	}
	for _, term := range []spi.LeaseInfo{first, second} {
		if want := fmt.Sprintf(`data-token="%d" data-holder="%s"`, term.Token, term.Owner); !strings.Contains(dom, want) {
			t.Errorf("the timeline lacks %s #%d", term.Owner, term.Token)
		}
	}
	t.Logf("after the failover %s's page shows %s #%d", viewer.owner, who, tok)

	shot := filepath.Join(t.TempDir(), "status-page.png")
	if os.Getenv("SIMBA_UPDATE_SCREENSHOT") == "1" {
		shot, err = filepath.Abs(filepath.Join("..", "..", "docs", "status-page.png"))
		if err != nil {
			t.Fatal(err)
		}
	}
	browse(t, bin, url, "--screenshot="+shot, "--window-size=1100,900")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG", shot)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
