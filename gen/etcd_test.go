package gen

import (
	"slices"
	"testing"
)

// TestEtcdLayoutFrozen: the repository spec keeps the etcd layout and transaction guards of
// protocol 5.x: keys attached to the session's lease, the token as the lease key's create
// revision, and the compares that make acquire and release safe.
func TestEtcdLayoutFrozen(t *testing.T) {
	s, err := LoadEtcd("../spec")
	if err != nil {
		t.Fatal(err)
	}
	if s.Prefix != "/simba" {
		t.Errorf("prefix %q, frozen as /simba", s.Prefix)
	}
	want := map[string]string{
		"session": "<prefix>/sessions/<sid>",
		"lease":   "<prefix>/leases/<name>",
		"held":    "<prefix>/held/<sid>/<name>",
		"member":  "<prefix>/groups/<group>/<sid>",
	}
	for _, k := range s.Keys {
		if p, ok := want[k.Name]; ok && p != k.Pattern {
			t.Errorf("key %s is %s, frozen as %s", k.Name, k.Pattern, p)
		}
		delete(want, k.Name)
		if (k.Token != "") != (k.Name == "lease") {
			t.Errorf("key %s token %q: only the lease key carries the token", k.Name, k.Token)
		}
	}
	for k := range want {
		t.Errorf("key %s is missing", k)
	}
	guards := map[string][]EtcdCmp{
		"acquire": {{"session", "create_revision", ">", "0"}, {"lease", "create_revision", "=", "0"}},
		"release": {{"lease", "create_revision", "=", "token"}, {"lease", "lease", "=", "lease"}},
	}
	for _, tx := range s.Txns {
		if g, ok := guards[tx.Name]; ok && !slices.Equal(g, tx.If) {
			t.Errorf("txn %s guard %v, frozen as %v", tx.Name, tx.If, g)
		}
		delete(guards, tx.Name)
	}
	for n := range guards {
		t.Errorf("txn %s is missing", n)
	}
}

// TestEtcdTxnParams: a transaction's builder takes exactly what its keys, compares and puts
// use, in the fixed order.
func TestEtcdTxnParams(t *testing.T) {
	s, err := LoadEtcd("../spec")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"acquire": {"prefix", "sid", "name", "owner", "lease"},
		"release": {"prefix", "sid", "name", "lease", "token"},
		"join":    {"prefix", "sid", "group", "owner", "lease"},
		"leave":   {"prefix", "sid", "group"},
		"report":  {"prefix", "sid"},
	}
	for _, tx := range s.Txns {
		var got []string
		for _, p := range s.txnParams(tx) {
			got = append(got, p.name)
		}
		if !slices.Equal(got, want[tx.Name]) {
			t.Errorf("%s takes %v, want %v", tx.Name, got, want[tx.Name])
		}
	}
}
