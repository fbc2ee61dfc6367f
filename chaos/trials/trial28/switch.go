package main

import (
	"io"
	"net"
	"sync"
)

// switcher forwards TCP connections to a target that can be changed: Switch points new
// connections at another server and closes the open ones, as a virtual IP or a DNS name moved
// to a promoted replica does for a client.
type switcher struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

func newSwitcher(target string) (*switcher, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &switcher{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go s.serve()
	return s, nil
}

func (s *switcher) Addr() string { return s.ln.Addr().String() }

func (s *switcher) Switch(target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target = target
	for c := range s.conns {
		c.Close()
	}
}

func (s *switcher) Close() { s.ln.Close(); s.Switch("") }

func (s *switcher) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *switcher) handle(c net.Conn) {
	s.mu.Lock()
	target := s.target
	s.mu.Unlock()
	u, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	s.mu.Lock()
	s.conns[c], s.conns[u] = struct{}{}, struct{}{}
	s.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	s.mu.Lock()
	delete(s.conns, c)
	delete(s.conns, u)
	s.mu.Unlock()
}
