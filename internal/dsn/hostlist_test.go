package dsn

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseHostList(t *testing.T) {
	hl, err := ParseHostList("u%40x:p%3Aw@a,b:1,[::1]/x/y?t=1&t=2", 2181, "server")
	if err != nil {
		t.Fatal(err)
	}
	want := HostList{Hosts: []string{"a:2181", "b:1", "[::1]:2181"}, User: "u@x", Password: "p:w", Path: "/x/y"}
	if got := hl; !reflect.DeepEqual(got.Hosts, want.Hosts) || got.User != want.User || got.Password != want.Password || got.Path != want.Path {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := hl.Query["t"]; !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("query t = %v", got)
	}
	for in, msg := range map[string]string{
		"":              "no servers",
		"a,,b":          "empty server",
		"a:0":           "bad port",
		"::1":           "bad server",
		":1":            "has no host",
		"user@a":        "user without password",
		":secret@a":     "bad user",
		"a/%zz":         "bad path",
		"a?%zz":         "bad query",
		"u:se%zzcret@a": "bad password",
		"a:2181#frag":   "no #fragment",
		"a/chroot#x":    "no #fragment",
	} {
		_, err := ParseHostList(in, 2181, "server")
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one containing %q", in, err, msg)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: error %v repeats the password", in, err)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	var f TLSFiles
	if ok, err := f.Set("timeout", "1s"); ok || err != nil {
		t.Fatalf("timeout taken as a TLS parameter: %v %v", ok, err)
	}
	if ok, err := f.Set("ca", ""); !ok || err == nil {
		t.Fatalf("empty ca: %v %v", ok, err)
	}
	if _, err := (TLSFiles{Cert: "c.pem"}).Config(); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("cert without key: %v", err)
	}
	if _, err := (TLSFiles{CA: "/nonexistent/ca.pem"}).Config(); err == nil {
		t.Fatal("a missing ca file was accepted")
	}
	tc, err := (TLSFiles{ServerName: "zk.local"}).Config()
	if err != nil || tc.ServerName != "zk.local" || tc.MinVersion == 0 {
		t.Fatalf("config %+v, %v", tc, err)
	}
}
