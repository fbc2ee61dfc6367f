package etcd

import (
	"fmt"
	"testing"
)

// TestLeaseReadsAreNotKeysOnly: the keep-alive's reads of the lease keys must return each key's
// lease, which a keys-only read does not on etcd 3.7 (the server answers it from its in-memory
// index, whose entries carry the create and mod revisions and the version but no lease): on
// such a server every held name read as put on no lease, and each keep-alive revoked every
// lease the session held as a corrupt record (seen in bench/cmd/benchpeers on its embedded
// etcd v3.7.3, 2026-12-07; the shared etcd 3.4 of the tests fills the lease in either way,
// so this checks the reads themselves). Both forms: one read per name, and the one range.
func TestLeaseReadsAreNotKeysOnly(t *testing.T) {
	for _, n := range []int{1, 10, 200} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("name-%03d", i)
		}
		ops, _ := appendLeaseReads(nil, "/p", names, 127)
		if len(ops) == 0 {
			t.Fatalf("%d names: no reads", n)
		}
		for i, op := range ops {
			if op.IsKeysOnly() {
				t.Errorf("%d names: read %d of the lease keys is keys-only: etcd 3.7 answers it without the keys' leases", n, i)
			}
		}
	}
}
