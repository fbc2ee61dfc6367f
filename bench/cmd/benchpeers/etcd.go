package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts a one-member etcd in this process, with its data under dir, and returns
// its client URL and a stop function. The harness runs it in a child process (spawnEtcd).
func startEtcd(dir string) (string, func(), error) {
	cp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	pp, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "fatal" // its shutdown logs errors for closed listeners
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("embedded etcd not ready after 30 s")
	}
	return cu.String(), e.Close, nil
}

// spawnEtcd starts the one-member etcd of startEtcd in a child process (this binary with
// -etcd dir) and returns its client URL and a stop function. A child process, not this one:
// etcd's goroutines and garbage would otherwise share this process's scheduler and collector
// with every row being timed, whatever the server.
func spawnEtcd(dir string) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(exe, "-etcd", dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	exited := make(chan struct{})
	stop := func() {
		_ = in.Close() // the child stops etcd and exits when its stdin ends
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	var s string
	select {
	case s = <-line:
	case <-time.After(40 * time.Second):
		s = "no answer after 40 s"
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	if u, ok := strings.CutPrefix(s, "url "); ok {
		return u, stop, nil
	}
	stop()
	return "", nil, fmt.Errorf("etcd process: %s", s)
}

// runEtcd is the child process of spawnEtcd: it starts etcd, prints its client URL and
// serves until its stdin ends (the parent stops it, or died).
func runEtcd(dir string) int {
	u, stop, err := startEtcd(dir)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("url", u)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return 0
}
