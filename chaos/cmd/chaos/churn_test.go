package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"math/rand/v2"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/chaos/history"
	"github.com/simba-go/simba/open"
)

// syncBuffer is a bytes.Buffer safe for the worker's callbacks and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func events(t *testing.T, s string) []history.Event {
	t.Helper()
	var evs []history.Event
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var e history.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestChurn: a worker with -churn stops its election (leaves its group) again and again, with
// ctxs that have ended among them, and starts (joins) again each time: it is granted its name
// (every partition) again after a churn, each term it acquires ends before the next one of the
// name begins, and no NewElection, Start or JoinGroup after a churn fails (churnFailed's line).
func TestChurn(t *testing.T) {
	for _, mode := range []string{"election", "group"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b, err := open.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "churn.db"), open.WithAutoMigrate())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			c, err := simba.New(b, simba.WithTTL(time.Second), simba.WithOwner("w1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			var out, errOut syncBuffer
			w := &worker{rec: &recorder{worker: "w1", out: &out}, ttl: time.Second, every: 50 * time.Millisecond,
				churn: 100 * time.Millisecond, churnRng: rand.New(rand.NewPCG(1206, 11)), errOut: &errOut}
			done := make(chan error, 1)
			go func() {
				if mode == "election" {
					done <- w.election(ctx, c, "churn")
				} else {
					done <- w.group(ctx, c, "churn", 2)
				}
			}()
			// Until the name (partition 0) was acquired after the fourth begin: three churns
			// done, every kind of churnCtx likely among them.
			name := "churn"
			if mode == "group" {
				name = "churn.0"
			}
			for {
				begins, after := 0, false
				for _, e := range events(t, out.String()) {
					switch {
					case e.Name != name:
					case e.Kind == history.Begin:
						begins++
					case e.Kind == history.Acquired && begins >= 4:
						after = true
					}
				}
				if after {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("the worker returned (%v) before its fourth term; stderr: %s", err, errOut.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if s := errOut.String(); s != "" {
				t.Errorf("churn failures: %s", s)
			}
			open := map[string]int64{}
			for _, e := range events(t, out.String()) {
				switch e.Kind {
				case history.Acquired:
					if tok, ok := open[e.Name]; ok && tok != e.Token {
						t.Errorf("%s: token %d acquired while token %d had not ended", e.Name, e.Token, tok)
					}
					open[e.Name] = e.Token
				case history.Ended:
					delete(open, e.Name)
				}
			}
		})
	}
}
