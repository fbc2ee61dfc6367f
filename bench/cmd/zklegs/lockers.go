package main

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// locker is one side of a pair.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	close()
}

const lockName = "handover"

// open returns mode's locker, its connections dialled through rec.
func open(mode, server, root string, rec *recorder) (locker, error) {
	switch mode {
	case "simba":
		b, err := zookeeper.New("zk://"+server+root+"/simba?tickTime=200ms", zookeeper.WithDialer(rec.dial))
		if err != nil {
			return nil, err
		}
		c, err := simba.New(b, simba.WithTTL(2*time.Second))
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		return &simbaLocker{b: b, c: c}, nil
	case "bare":
		return openBare(server, root+"/bare", rec)
	case "zklock":
		c, err := connect(server, rec)
		if err != nil {
			return nil, err
		}
		return &zkLocker{c: c, l: zk.NewLock(c, root+"/zklock/"+lockName, zk.WorldACL(zk.PermAll))}, nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func connect(server string, rec *recorder) (*zk.Conn, error) {
	if rec == nil {
		c, _, err := zk.Connect([]string{server}, 2*time.Second, zk.WithLogger(quiet{}))
		return c, err
	}
	c, _, err := zk.Connect([]string{server}, 2*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(rec.dial))
	return c, err
}

type simbaLocker struct {
	b *zookeeper.Backend
	c *simba.Client
	h *simba.Held
}

func (s *simbaLocker) lock(ctx context.Context) (err error) {
	s.h, err = s.c.Lock(ctx, lockName)
	return err
}

func (s *simbaLocker) unlock(ctx context.Context) error { return s.h.Unlock(ctx) }

func (s *simbaLocker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.c.Close(ctx)
	_ = s.b.Close()
}

type zkLocker struct {
	c *zk.Conn
	l *zk.Lock
}

func (z *zkLocker) lock(context.Context) error   { return z.l.Lock() }
func (z *zkLocker) unlock(context.Context) error { return z.l.Unlock() }
func (z *zkLocker) close()                       { z.c.Close() }

// bareLocker sends with go-zookeeper alone the requests of Simba's hand-over: the release
// multi[setData, delete] of the lease node; for a waiter, its queue entry multi[create
// ephemeral sequential waiter node, setData queue], a child watch on the leases node, and on
// the watch's event the acquire multi[create lease, setData queue at the version its entry
// left, delete its waiter node]. (A child watch, not Simba's persistent watch on the lease
// node, which go-zookeeper cannot set: it fires once, on the deletion.)
type bareLocker struct {
	c                    *zk.Conn
	leases, lease, queue string
}

func openBare(server, root string, rec *recorder) (*bareLocker, error) {
	c, err := connect(server, rec)
	if err != nil {
		return nil, err
	}
	b := &bareLocker{c: c, leases: root + "/leases", lease: root + "/leases/" + lockName, queue: root + "/queue"}
	if err := ensurePath(c, b.leases); err != nil {
		c.Close()
		return nil, err
	}
	if err := ensurePath(c, b.queue); err != nil {
		c.Close()
		return nil, err
	}
	return b, nil
}

var owner = []byte("zklegs")

func (b *bareLocker) lock(context.Context) error {
	acl := zk.WorldACL(zk.PermAll)
	if _, err := b.c.Create(b.lease, owner, zk.FlagEphemeral, acl); !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	mr, err := b.c.Multi(&zk.CreateRequest{Path: b.queue + "/w-", Data: owner, Acl: acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
		&zk.SetDataRequest{Path: b.queue, Version: -1})
	if err != nil {
		return err
	}
	mine, version := mr[0].String, mr[1].Stat.Version
	for {
		children, _, ev, err := b.c.ChildrenW(b.leases)
		if err != nil {
			return err
		}
		for _, c := range children {
			if b.leases+"/"+c == b.lease {
				<-ev
				break
			}
		}
		_, err = b.c.Multi(&zk.CreateRequest{Path: b.lease, Data: owner, Acl: acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: b.queue, Version: version}, &zk.DeleteRequest{Path: mine, Version: -1})
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
}

func (b *bareLocker) unlock(context.Context) error {
	_, err := b.c.Multi(&zk.SetDataRequest{Path: b.lease, Version: -1}, &zk.DeleteRequest{Path: b.lease, Version: -1})
	return err
}

func (b *bareLocker) close() { b.c.Close() }

// ensurePath creates path and its parents (persistent, open ACL) where missing.
func ensurePath(c *zk.Conn, path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := c.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", path[:i], err)
		}
	}
	return nil
}

// removeTree deletes root and everything under it (this run's nodes only).
func removeTree(server, root string) {
	c, err := connect(server, nil)
	if err != nil {
		return
	}
	defer c.Close()
	var del func(string)
	del = func(p string) {
		children, _, err := c.Children(p)
		if err != nil {
			return
		}
		for _, ch := range children {
			del(p + "/" + ch)
		}
		_ = c.Delete(p, -1)
	}
	del(root)
}

// childTrace is what a child leaves in its trace file.
type childTrace struct {
	GCs    uint64
	Events []event
}

// runChild is the child of a pair: it locks and unlocks as told on stdin ("lock", "unlock"),
// answers "held" or "unlocked" (or "error: …"), and when stdin ends writes its trace.
func runChild(mode, server, root, traceFile string) error {
	rec := &recorder{}
	l, err := open(mode, server, root, rec)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var err error
		switch in.Text() {
		case "lock":
			if err = l.lock(ctx); err == nil {
				rec.mark(kindGranted)
				fmt.Println("held")
			}
		case "unlock":
			rec.mark(kindUnlock)
			if err = l.unlock(ctx); err == nil {
				fmt.Println("unlocked")
			}
		default:
			err = fmt.Errorf("unknown command %q", in.Text())
		}
		if err != nil {
			fmt.Println("error:", err)
		}
	}
	gcs := gcCycles()
	l.close()
	f, err := os.Create(traceFile)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(f).Encode(childTrace{GCs: gcs, Events: rec.take()}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readTrace(file string) ([]event, uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var t childTrace
	if err := gob.NewDecoder(f).Decode(&t); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", file, err)
	}
	return t.Events, t.GCs, nil
}
