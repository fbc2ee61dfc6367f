package gen

import (
	"slices"
	"strings"
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
		"waiter":  "<prefix>/waiters/<name>/<sid>",
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
		"acquire": {
			{Key: "session", Target: "create_revision", Op: ">", Value: "0"},
			{Key: "lease", Target: "create_revision", Op: "=", Value: "0"},
			{Prefix: "queue", Target: "create_revision", Op: "=", Value: "0"}, // no one waits
		},
		"take": {
			{Key: "session", Target: "create_revision", Op: ">", Value: "0"},
			{Key: "lease", Target: "create_revision", Op: "=", Value: "0"},
			{Key: "waiter", Target: "create_revision", Op: "=", Value: "rev"},
			{Prefix: "queue", Target: "create_revision", Op: ">=", Value: "rev"}, // no older waiter
		},
		"release": {
			{Key: "lease", Target: "create_revision", Op: "=", Value: "token"},
			{Key: "lease", Target: "lease", Op: "=", Value: "lease"},
		},
		// A stale held index entry goes only while its lease key is not on the session's lease:
		// the entry of a name granted to the session again keeps its create revision (a put).
		"drop_held": {
			{Key: "held", Target: "create_revision", Op: "=", Value: "token"},
			{Key: "lease", Target: "lease", Op: "!=", Value: "lease"},
		},
	}
	txns := map[string]EtcdTxn{}
	for _, tx := range s.Txns {
		txns[tx.Name] = tx
	}
	// acquire_queued is acquire whose else branch is enqueue, nested.
	aq, a := txns["acquire_queued"], txns["acquire"]
	if !slices.Equal(aq.If, a.If) || !slices.Equal(aq.Then, a.Then) || !slices.Equal(aq.Else, []EtcdOp{{Op: "txn", Txn: "enqueue"}}) {
		t.Errorf("acquire_queued = %+v, want acquire's guard and grant with enqueue nested in else", aq)
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
		"enqueue": {"prefix", "sid", "name", "owner", "lease"},
		// acquire_queued nests enqueue: it takes what both take.
		"acquire_queued": {"prefix", "sid", "name", "owner", "lease"},
		"take":           {"prefix", "sid", "name", "owner", "lease", "rev"},
		"withdraw":       {"prefix", "sid", "name", "lease"},
		"drop_held":      {"prefix", "sid", "name", "lease", "token"},
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

// TestEtcdQueuePrefixes: the queue of a name is exactly its waiter keys: the queue prefix of a
// name is a prefix of its waiter keys and of no other name's (names cannot contain "/"), so a
// hint watch of a name's queue sees only its waiters, and the waiters prefix holds every queue.
func TestEtcdQueuePrefixes(t *testing.T) {
	s, err := LoadEtcd("../spec")
	if err != nil {
		t.Fatal(err)
	}
	pat := map[string]string{}
	for _, k := range s.Keys {
		pat["key "+k.Name] = k.Pattern
	}
	for _, p := range s.Prefixes {
		pat["prefix "+p.Name] = p.Pattern
	}
	fill := func(p, name string) string {
		return strings.NewReplacer("<prefix>", "/simba", "<name>", name, "<sid>", "0123456789abcdef").Replace(p)
	}
	waiter := fill(pat["key waiter"], "a")
	if !strings.HasPrefix(waiter, fill(pat["prefix queue"], "a")) || !strings.HasPrefix(waiter, fill(pat["prefix waiters"], "a")) {
		t.Errorf("waiter key %s is not under its queue and waiters prefixes", waiter)
	}
	if strings.HasPrefix(fill(pat["key waiter"], "a.b"), fill(pat["prefix queue"], "a")) {
		t.Error("the queue of a holds a waiter of a.b")
	}
}
