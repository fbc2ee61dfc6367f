package minttl

import (
	"sync"
	"testing"
	"time"
)

func TestShortestKeepsTheMinimum(t *testing.T) {
	var s Shortest
	if got := s.Get(); got != 0 {
		t.Fatalf("zero value: %v, want 0", got)
	}
	var wg sync.WaitGroup
	for i := 1; i <= 50; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); s.Note(time.Duration(i) * time.Second) }()
	}
	wg.Wait()
	s.Note(0)
	s.Note(-time.Second)
	if got := s.Get(); got != time.Second {
		t.Fatalf("after 1..50 s, 0 and -1 s: %v, want 1s", got)
	}
}

func TestProbeAndReply(t *testing.T) {
	for _, c := range []struct{ ttl, probe, reply time.Duration }{
		{100 * time.Millisecond, MinProbe, MinReply},
		{time.Second, time.Second / 6, MinReply},
		{1500 * time.Millisecond, 250 * time.Millisecond, MinReply},
		{3 * time.Second, 500 * time.Millisecond, time.Second},
		{15 * time.Second, 2500 * time.Millisecond, 5 * time.Second},
	} {
		p := Probe(c.ttl)
		if p != c.probe {
			t.Errorf("Probe(%v) = %v, want %v", c.ttl, p, c.probe)
		}
		if r := Reply(p); r != c.reply {
			t.Errorf("Reply(%v) = %v, want %v", p, r, c.reply)
		}
	}
}
