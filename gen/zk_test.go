package gen

import "testing"

// TestZKLayoutFrozen: the repository spec keeps DESIGN.md §5's ZooKeeper layout.
func TestZKLayoutFrozen(t *testing.T) {
	s, err := LoadZK("../spec")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ mode, data, token string }{
		"/simba":                      {"persistent", "", ""},
		"/simba/leases":               {"persistent", "", ""},
		"/simba/leases/<name>":        {"ephemeral", "owner", "czxid"},
		"/simba/groups":               {"persistent", "", ""},
		"/simba/groups/<group>":       {"persistent", "", ""},
		"/simba/groups/<group>/<sid>": {"ephemeral", "owner", ""},
		"/simba/waiters":              {"persistent", "", ""},
		"/simba/waiters/<name>":       {"container", "", ""},
		"/simba/waiters/<name>/<sid>": {"ephemeral_sequential", "owner", ""},
	}
	for _, n := range s.Nodes {
		w, ok := want[n.Path]
		if !ok {
			continue
		}
		delete(want, n.Path)
		if n.Mode != w.mode || n.Data != w.data || n.Token != w.token {
			t.Errorf("%s is %s/%q/%q, frozen as %s/%q/%q", n.Path, n.Mode, n.Data, n.Token, w.mode, w.data, w.token)
		}
		if permBits(s.Perms, n.ACL.World)&(s.Perms["delete"]|s.Perms["write"]) != 0 {
			t.Errorf("%s lets everyone delete or write", n.Path)
		}
	}
	for p := range want {
		t.Errorf("node %s is missing", p)
	}
}
