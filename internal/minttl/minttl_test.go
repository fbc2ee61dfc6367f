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
