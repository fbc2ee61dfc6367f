package adoptlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestSinkFollowsDefaultThenAdopted: a Sink's logger, and the loggers derived from it with
// With and WithGroup before the adoption, write to slog.Default() (as it is at each record)
// until Adopt, then to the adopted logger, with their attributes and groups.
func TestSinkFollowsDefaultThenAdopted(t *testing.T) {
	var def, adopted bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	defer slog.SetDefault(prev)
	var s Sink
	l := s.Logger()
	d := l.With("backend", "redis").WithGroup("g")
	l.Warn("before")
	d.Warn("derived-before", "k", 1)
	s.Adopt(nil) // changes nothing
	l.Warn("before-nil")
	s.Adopt(slog.New(slog.NewTextHandler(&adopted, nil)))
	l.Warn("after")
	d.Warn("derived-after", "k", 2)
	for _, want := range []string{"msg=before\n", "msg=derived-before backend=redis g.k=1", "msg=before-nil"} {
		if !strings.Contains(def.String(), want) {
			t.Errorf("slog.Default() got %q, want a line with %q", def.String(), want)
		}
	}
	for _, want := range []string{"msg=after", "msg=derived-after backend=redis g.k=2"} {
		if !strings.Contains(adopted.String(), want) || strings.Contains(def.String(), want) {
			t.Errorf("adopted got %q (default %q), want a line with %q there only", adopted.String(), def.String(), want)
		}
	}
	if s.Target() == slog.Default() {
		t.Error("Target after Adopt is still slog.Default()")
	}
}
