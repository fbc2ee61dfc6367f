package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
)

// TestHintsRecheckOnceServerAnswers: a backend whose first Hints could not check the channel
// permissions (the server refused connections) checks them once the server answers, and says
// what it found: an ACL user without Simba's channel patterns gets an ERROR naming NOPERM
// (before, only the first warning, which said it would not check again, and hints that never
// came), one with them an INFO. Close ends the check's runner.
func TestHintsRecheckOnceServerAnswers(t *testing.T) {
	pc, port := startPrivServerProc(t, "user default off",
		"user simba on >s3cret ~simba:* &simba:lease:{*} &simba:group:{*} +@all",
		"user narrow on >s3cret ~simba:* resetchannels +@all")
	pc.kill(port)

	type tcase struct {
		user string
		want []string
		logs *testenv.LogBuffer
		b    *Backend
	}
	cases := []*tcase{
		{user: "narrow", want: []string{"level=ERROR", "refuses to let this user subscribe", "NOPERM"}},
		{user: "simba", want: []string{"level=INFO", "granted"}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range cases {
		tc.logs = &testenv.LogBuffer{}
		b, err := Open(fmt.Sprintf("redis://%s:s3cret@127.0.0.1:%d", tc.user, port), WithLogger(tc.logs.Logger()))
		if err != nil {
			t.Fatal(err)
		}
		tc.b = b
		defer b.Close()
		if _, err := b.Hints(ctx); err != nil {
			t.Fatalf("%s: Hints at a server that refuses connections: %v, want the channel without the check", tc.user, err)
		}
		if log := tc.logs.String(); !strings.Contains(log, "could not check the permission") {
			t.Fatalf("%s: no warning that the permissions went unchecked:\n%s", tc.user, log)
		}
	}

	pc.start(port)
	if err := pc.waitReady(port); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		deadline := time.Now().Add(45 * time.Second) // attempts 1, 3, 7, 15, 31 s after Hints
		for {
			log := tc.logs.String()
			ok := true
			for _, w := range tc.want {
				ok = ok && strings.Contains(log, w)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the server answers, but no line with %q was logged:\n%s", tc.user, tc.want, log)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if log := tc.logs.String(); strings.Count(log, "simba: redis: checked")+strings.Count(log, "refuses to let") != 1 {
			t.Errorf("%s: want exactly one result of the check:\n%s", tc.user, log)
		}
	}
	for _, tc := range cases {
		start := time.Now()
		if err := tc.b.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.user, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: Close took %v", tc.user, d)
		}
	}
}
