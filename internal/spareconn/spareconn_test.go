package spareconn

import (
	"context"
	"errors"
	"testing"
)

// TestSlots: one slot fewer than connections, none below two; a full Slots waits until ctx
// ends; Leave frees what Enter took.
func TestSlots(t *testing.T) {
	if s := New(1); s.Cap() != 0 {
		t.Fatalf("New(1).Cap() = %d, want 0", s.Cap())
	}
	if took, err := (Slots{}).Enter(context.Background()); took || err != nil {
		t.Fatalf("zero Slots: Enter = %v, %v; want false, nil", took, err)
	}
	s := New(3)
	if s.Cap() != 2 {
		t.Fatalf("New(3).Cap() = %d, want 2", s.Cap())
	}
	for range 2 {
		if took, err := s.Enter(context.Background()); !took || err != nil {
			t.Fatalf("Enter = %v, %v; want true, nil", took, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if took, err := s.Enter(ctx); took || !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter on full slots with an ended ctx = %v, %v; want false, context.Canceled", took, err)
	}
	s.Leave(true)
	if s.InUse() != 1 {
		t.Fatalf("InUse after one Leave = %d, want 1", s.InUse())
	}
	if took, err := s.Enter(ctx); !took || err != nil {
		t.Fatalf("Enter with a free slot = %v, %v; want true, nil (a free slot is taken whatever ctx)", took, err)
	}
}
