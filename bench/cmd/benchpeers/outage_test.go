package main

import (
	"bufio"
	"io"
	"net"
	"reflect"
	"testing"
	"time"
)

// One seed, one schedule: faults one at a time, within the scenario's bounds and the row's
// time, on the clients there are.
func TestOutageScheduleSeeded(t *testing.T) {
	const d = 2 * time.Minute
	a := outageSchedule(42, d, 3, 0.5)
	if !reflect.DeepEqual(a, outageSchedule(42, d, 3, 0.5)) {
		t.Fatal("the same seed gave two schedules")
	}
	if reflect.DeepEqual(a, outageSchedule(43, d, 3, 0.5)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if len(a) < 10 {
		t.Fatalf("%d faults in %v (one every 1.3–6 s expected)", len(a), d)
	}
	var stalls int
	last := time.Duration(0)
	for i, f := range a {
		if f.Client < 0 || f.Client >= 3 {
			t.Errorf("fault %d on client %d", i, f.Client)
		}
		if gap := f.At - last; gap < outGapMin || gap > outGapMax {
			t.Errorf("fault %d starts %v after the last heal", i, gap)
		}
		if f.For > outFaultMax || f.For < outFaultMin && f.At+f.For != d {
			t.Errorf("fault %d lasts %v", i, f.For)
		}
		if f.At+f.For > d {
			t.Errorf("fault %d ends at %v, after the row's %v", i, f.At+f.For, d)
		}
		if f.Stall {
			stalls++
		}
		last = f.At + f.For
	}
	if stalls == 0 || stalls == len(a) {
		t.Errorf("%d stalls of %d faults at a share of 0.5", stalls, len(a))
	}
	for _, f := range outageSchedule(42, d, 3, 0) {
		if f.Stall {
			t.Fatal("a stall at a share of 0")
		}
	}
}

// The shared resource counts every overlap, and lets through the fence only those where no
// write carried a token below the highest seen; without tokens every overlap goes through.
func TestOutageSharedFence(t *testing.T) {
	r := &outShared{inside: map[*outSection]bool{}}
	old, newer := &outSection{token: 5, accepted: true}, &outSection{token: 6, accepted: true}
	r.enter(old)
	r.enter(newer) // overlaps old
	r.exit(old)    // token 5 < 6: refused
	r.exit(newer)
	if len(r.pairs) != 1 || old.accepted || !newer.accepted {
		t.Fatalf("pairs %d, old accepted %v, newer accepted %v: want 1, false, true", len(r.pairs), old.accepted, newer.accepted)
	}
	third := &outSection{token: 7, accepted: true}
	r.enter(third)
	r.exit(third)
	if len(r.pairs) != 1 || !third.accepted {
		t.Fatalf("a section alone: pairs %d, accepted %v", len(r.pairs), third.accepted)
	}
	u := &outShared{inside: map[*outSection]bool{}}
	a, b := &outSection{accepted: true}, &outSection{accepted: true}
	u.enter(a)
	u.enter(b)
	u.exit(a)
	u.exit(b)
	if len(u.pairs) != 1 || !a.accepted || !b.accepted {
		t.Fatalf("without tokens: pairs %d, accepted %v %v", len(u.pairs), a.accepted, b.accepted)
	}
}

// echoServer answers every line with itself, until the listener closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line on c and reads one back, giving up after d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// A blackhole silences the open connection for good and takes new ones without an answer; a
// heal lets new connections through while the silenced one stays silent. The heal is noted.
func TestLinkProxyBlackhole(t *testing.T) {
	p, err := newLinkProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	old, oldR := dial()
	if s, err := roundTrip(old, oldR, 10*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("through the link: %q, %v", s, err)
	}
	before := time.Now()
	p.set(linkBlackhole)
	// The silence is what is checked: no answer within the deadline (a timeout error).
	if s, err := roundTrip(old, oldR, 200*time.Millisecond); err == nil {
		t.Fatalf("a blackholed connection answered %q", s)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a blackholed connection ended instead of going silent: %v", err)
	}
	during, duringR := dial()
	if s, err := roundTrip(during, duringR, 200*time.Millisecond); err == nil {
		t.Fatalf("a connection taken during the blackhole answered %q", s)
	}
	p.set(linkUp)
	if _, ok := p.healedIn(before, time.Now()); !ok {
		t.Fatal("the heal was not noted")
	}
	fresh, freshR := dial()
	if s, err := roundTrip(fresh, freshR, 10*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("a new connection after the heal: %q, %v", s, err)
	}
	if s, err := roundTrip(old, oldR, 200*time.Millisecond); err == nil {
		t.Fatalf("the silenced connection answered after the heal: %q", s)
	}
}

// A stall holds the bytes back and delivers them at the heal.
func TestLinkProxyStall(t *testing.T) {
	p, err := newLinkProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if s, err := roundTrip(c, r, 10*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("through the link: %q, %v", s, err)
	}
	p.set(linkStall)
	if s, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("a stalled link answered %q", s)
	}
	p.set(linkUp)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "ping\n" {
		t.Fatalf("the stalled bytes after the heal: %q, %v", s, err)
	}
}
