package simbatest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestVirtualClockFiresInOrderAtDeadlines(t *testing.T) {
	c := NewVirtualClock()
	var mu sync.Mutex
	var fired []string
	record := func(name string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			fired = append(fired, name+"@"+c.Now().String())
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	c.AfterFunc(time.Second, record("a2")) // same deadline: arming order
	c.AfterFunc(2*time.Second, func() {
		record("b")()
		// Armed by a callback within the advanced span: fires in this Advance.
		c.AfterFunc(500*time.Millisecond, record("b+"))
	})
	stopped := c.AfterFunc(2*time.Second, record("stopped"))
	late := c.AfterFunc(10*time.Second, record("late"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopped.Stop() {
		t.Fatal("second Stop reported true")
	}
	if n := c.Pending(); n != 5 {
		t.Fatalf("Pending = %d, want 5", n)
	}
	c.Advance(3 * time.Second)
	want := []string{"a@1s", "a2@1s", "b@2s", "b+@2.5s", "c@3s"}
	mu.Lock()
	got := append([]string(nil), fired...)
	mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if c.Now() != 3*time.Second {
		t.Fatalf("Now = %v", c.Now())
	}
	if next, ok := c.Next(); !ok || next != 10*time.Second {
		t.Fatalf("Next = %v %v", next, ok)
	}
	c.Set(10 * time.Second)
	if late.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	if _, ok := c.Next(); ok {
		t.Fatal("timers left after firing all")
	}
}

func TestVirtualClockCallbackOnOwnGoroutine(t *testing.T) {
	c := NewVirtualClock()
	// A callback that takes a lock the advancing goroutine does not hold, and calls Now and
	// AfterFunc, must not deadlock.
	ran := make(chan time.Duration, 2)
	c.AfterFunc(time.Second, func() {
		ran <- c.Now()
		c.AfterFunc(time.Hour, func() {})
	})
	c.Advance(time.Second)
	if got := <-ran; got != time.Second {
		t.Fatalf("callback saw %v", got)
	}
	// d <= 0 runs at once without an Advance.
	c.AfterFunc(0, func() { ran <- c.Now() })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc(0) did not run")
	}
}

func TestVirtualClockSetBackwards(t *testing.T) {
	c := NewVirtualClock()
	c.Set(time.Hour)
	fired := make(chan struct{}, 1)
	c.AfterFunc(time.Minute, func() { fired <- struct{}{} })
	c.Set(-time.Hour)
	if c.Now() != -time.Hour {
		t.Fatalf("Now = %v", c.Now())
	}
	c.Advance(2*time.Hour + 30*time.Second)
	select {
	case <-fired:
		t.Fatal("timer fired before the clock reached its deadline again")
	default:
	}
	c.Advance(30 * time.Second)
	select {
	case <-fired:
	default:
		t.Fatal("timer did not fire at its deadline")
	}
}

func TestVirtualClockAdvanceNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1) did not panic")
		}
	}()
	NewVirtualClock().Advance(-1)
}

func TestVirtualClockBlockUntil(t *testing.T) {
	c := NewVirtualClock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.BlockUntil(2)
	}()
	c.AfterFunc(time.Second, func() {})
	select {
	case <-done:
		t.Fatal("BlockUntil(2) returned with one timer")
	case <-time.After(20 * time.Millisecond):
	}
	c.AfterFunc(time.Second, func() {})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("BlockUntil(2) did not return with two timers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := c.BlockUntilContext(ctx, 3); err != context.DeadlineExceeded {
		t.Fatalf("BlockUntilContext = %v, want deadline exceeded", err)
	}
}

func TestVirtualClockConcurrentUse(t *testing.T) {
	c := NewVirtualClock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	count, stopped := 0, 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				tm := c.AfterFunc(time.Duration(i+1)*time.Millisecond, func() {
					mu.Lock()
					count++
					mu.Unlock()
				})
				if i%5 == 0 && tm.Stop() {
					mu.Lock()
					stopped++
					mu.Unlock()
				}
				_ = c.Now()
			}
		}()
	}
	for range 20 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	c.Advance(time.Second)
	mu.Lock()
	defer mu.Unlock()
	// Every timer either fired exactly once or was stopped before firing.
	if count+stopped != 8*50 || c.Pending() != 0 {
		t.Fatalf("fired %d + stopped %d, want %d; pending %d", count, stopped, 8*50, c.Pending())
	}
}
