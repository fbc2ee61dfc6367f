package wiretest

import (
	"fmt"
	"testing"

	"github.com/simba-go/simba/generated/wire"
)

// FuzzZKPathParsers: every parser of the ZooKeeper paths Simba reads back from the server
// (children of its nodes, watch events: anything another program may have created there)
// accepts a path only in the one form its builder writes: parsing, then building again, gives
// the same path. A parser that accepted another spelling (a sequence number with a sign, a
// segment with a slash) would let a node Simba never created pass for one of its own.
// testdata/fuzz/FuzzZKPathParsers holds the inputs CI replays.
func FuzzZKPathParsers(f *testing.F) {
	for _, s := range []string{
		wire.LeasePath("a"), wire.GroupPath("g"), wire.MemberPath("g", "0123456789abcdef"),
		wire.QueuePath("q"), wire.WaiterPath("q", "0123456789abcdef") + "0000000007",
		wire.WaiterPath("q", "0123456789abcdef") + "+000000007", wire.WaiterPath("q", "s") + "-000000007",
		wire.WaiterPath("q", "a-b") + "0000000001", "/simba/leases/", "/simba/leases//x", "/simba/leases/a/b",
		"/simba/waiters/q/s-99999999999", "/simba/waiters/q/-0000000001", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if name, ok := wire.ParseLeasePath(p); ok && wire.LeasePath(name) != p {
			t.Errorf("ParseLeasePath(%q) = %q, which builds %q", p, name, wire.LeasePath(name))
		}
		if g, ok := wire.ParseGroupPath(p); ok && wire.GroupPath(g) != p {
			t.Errorf("ParseGroupPath(%q) = %q, which builds %q", p, g, wire.GroupPath(g))
		}
		if g, sid, ok := wire.ParseMemberPath(p); ok && wire.MemberPath(g, sid) != p {
			t.Errorf("ParseMemberPath(%q) = %q %q, which builds %q", p, g, sid, wire.MemberPath(g, sid))
		}
		if name, ok := wire.ParseQueuePath(p); ok && wire.QueuePath(name) != p {
			t.Errorf("ParseQueuePath(%q) = %q, which builds %q", p, name, wire.QueuePath(name))
		}
		if name, sid, seq, ok := wire.ParseWaiterPath(p); ok {
			if built := wire.WaiterPath(name, sid) + fmt.Sprintf("%010d", seq); built != p {
				t.Errorf("ParseWaiterPath(%q) = %q %q %d, which builds %q", p, name, sid, seq, built)
			}
		}
	})
}
