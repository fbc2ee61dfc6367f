package simba_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// An event prints (String, and as a log attribute through LogValue) the fields that mean
// something for its kind only: no Reason but on a revocation or a session's loss, no Token
// but on an election or revocation, no Class but on a backend error. Before, a listener that
// logged e.Reason, or a JSON log of an event, showed RevokeReason(0) (or "Reason":0) on every
// event that is no revocation, and String gave "closed " with a trailing space.
func TestEventPrintsItsKindsFields(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		ev   simba.Event
		str  string
		json string
	}{
		{simba.Event{Kind: simba.EventSessionOpened, At: time.Second, Session: "s1"},
			"session-opened s1",
			`{"kind":"session-opened","at":1000000000,"session":"s1"}`},
		{simba.Event{Kind: simba.EventSessionExpired, At: time.Second, Session: "s1", Reason: simba.RevokedDeadline},
			"session-expired s1 (deadline)",
			`{"kind":"session-expired","at":1000000000,"session":"s1","reason":"deadline"}`},
		{simba.Event{Kind: simba.EventSessionExpired, At: time.Second, Session: "s1", Reason: simba.RevokedDeadline, Paused: 6 * time.Second},
			"session-expired s1 (deadline) paused 6s",
			`{"kind":"session-expired","at":1000000000,"session":"s1","reason":"deadline","paused":6000000000}`},
		{simba.Event{Kind: simba.EventElected, At: time.Second, Session: "s1", Name: "jobs", Token: 3},
			"elected jobs#3",
			`{"kind":"elected","at":1000000000,"session":"s1","name":"jobs","token":3}`},
		{simba.Event{Kind: simba.EventRevoked, At: time.Second, Session: "s1", Name: "jobs", Token: 3, Reason: simba.RevokedTakenOver},
			"revoked jobs#3 (taken-over)",
			`{"kind":"revoked","at":1000000000,"session":"s1","name":"jobs","token":3,"reason":"taken-over"}`},
		{simba.Event{Kind: simba.EventRevoked, At: time.Second, Session: "s1", Name: "jobs", Token: 3, Reason: simba.RevokedDeadline, Paused: 2500 * time.Millisecond},
			"revoked jobs#3 (deadline) paused 2.5s",
			`{"kind":"revoked","at":1000000000,"session":"s1","name":"jobs","token":3,"reason":"deadline","paused":2500000000}`},
		{simba.Event{Kind: simba.EventMembers, At: time.Second, Session: "s1", Name: "g", Members: []simba.SessionID{"s1", "s2"}, Partitions: []int{0, 2}},
			"members g members=[s1 s2] partitions=[0 2]",
			`{"kind":"members","at":1000000000,"session":"s1","name":"g","members":["s1","s2"],"partitions":[0,2]}`},
		{simba.Event{Kind: simba.EventBackendError, At: time.Second, Session: "s1", Op: simba.OpKeepAlive, Class: spi.Retryable, Err: boom},
			"backend-error keep-alive (retryable): boom",
			`{"kind":"backend-error","at":1000000000,"session":"s1","op":"keep-alive","class":"retryable","err":"boom"}`},
		{simba.Event{Kind: simba.EventBackendError, At: time.Second, Name: "jobs", Op: simba.OpAcquire, Class: spi.Permanent, Err: boom},
			"backend-error acquire jobs (permanent): boom",
			`{"kind":"backend-error","at":1000000000,"name":"jobs","op":"acquire","class":"permanent","err":"boom"}`},
		{simba.Event{Kind: simba.EventClosed, At: time.Second},
			"closed",
			`{"kind":"closed","at":1000000000}`},
		{simba.Event{Kind: simba.EventPaused, At: time.Second, Session: "s1", Paused: 1300 * time.Millisecond},
			"paused 1.3s s1",
			`{"kind":"paused","at":1000000000,"session":"s1","paused":1300000000}`},
	} {
		if got := tc.ev.String(); got != tc.str {
			t.Errorf("String() = %q, want %q", got, tc.str)
		}
		if got := fmt.Sprint(tc.ev); got != tc.str {
			t.Errorf("fmt.Sprint = %q, want %q", got, tc.str)
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
				return slog.Attr{}
			}
			return a
		}})).Info("", "event", tc.ev)
		got := strings.TrimSpace(buf.String())
		if want := `{"event":` + tc.json + `}`; got != want {
			t.Errorf("JSON log of %s:\n got %s\nwant %s", tc.str, got, want)
		}
	}
	if got := simba.RevokeReason(0).String(); got != "none" {
		t.Errorf("the zero RevokeReason prints %q, want none", got)
	}
}
