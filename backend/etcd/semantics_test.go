package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/internal/testenv"
)

// TestServerRangeCompare pins the etcd behaviour the waiter queue relies on (spec/etcd.yaml,
// waiters), on the real server: a compare over a key range holds only if it holds for every
// key in the range, and an empty range compares as one zero KeyValue (create revision 0); a
// put of an existing key keeps its create revision; a read after a put in one transaction
// sees the put; a sorted, limited range returns the oldest key first.
func TestServerRangeCompare(t *testing.T) {
	cli := rawClient(t, testenv.Etcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := testPrefix(t) + "/q/"
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		cli.Delete(dctx, p, clientv3.WithPrefix()) //nolint:errcheck
	})
	holds := func(c clientv3.Cmp) bool {
		t.Helper()
		r, err := cli.Txn(ctx).If(c).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r.Succeeded
	}
	cr := func(op string, v int64) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(p), op, v).WithPrefix()
	}
	if !holds(cr("=", 0)) || holds(cr(">", 0)) || !holds(cr(">", -1)) {
		t.Fatal("an empty range does not compare as create revision 0")
	}
	r1, err := cli.Put(ctx, p+"a", "")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cli.Put(ctx, p+"b", "")
	if err != nil {
		t.Fatal(err)
	}
	rev1, rev2 := r1.Header.Revision, r2.Header.Revision
	if holds(cr("=", 0)) {
		t.Error("a non-empty range compares as empty")
	}
	if !holds(cr(">", rev1-1)) || holds(cr(">", rev2-1)) {
		t.Errorf("> over a range: want true for every key newer than %d, false when %d is older than %d", rev1-1, rev1, rev2)
	}
	if _, err := cli.Put(ctx, p+"a", "again"); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Txn(ctx).Then(
		clientv3.OpPut(p+"c", "x"),
		clientv3.OpGet(p+"c"),
		clientv3.OpGet(p, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if kvs := r.Responses[1].GetResponseRange().Kvs; len(kvs) != 1 || kvs[0].CreateRevision != r.Header.Revision {
		t.Errorf("a read after a put in one transaction = %v, want the new key at revision %d", kvs, r.Header.Revision)
	}
	if kvs := r.Responses[2].GetResponseRange().Kvs; len(kvs) != 1 || string(kvs[0].Key) != p+"a" || kvs[0].CreateRevision != rev1 {
		t.Errorf("the first key by create revision = %v, want %sa created at %d (kept by a later put)", kvs, p, rev1)
	}
}
