package open_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/open"
)

// Open a backend by DSN (here a SQLite file; the same code takes postgres://, mysql://,
// redis://, redis+cluster://, redis+sentinel://, zk:// or etcd:// DSNs, from a flag or a configuration
// file), make a client on it and take a lock.
func Example() {
	dir, err := os.MkdirTemp("", "simba-open-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	dsn := "sqlite://" + filepath.Join(dir, "simba.db") // sqlite:///tmp/.../simba.db

	ctx := context.Background()
	b, err := open.Open(ctx, dsn, open.WithAutoMigrate(), open.WithPing())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close() // after the client: the caller owns the backend

	c, err := simba.New(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)

	err = c.WithLock(ctx, "nightly-report", func(ctx context.Context, t simba.Term) error {
		fmt.Println("holding nightly-report with a fencing token:", t.Token() > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// holding nightly-report with a fencing token: true
	// done: <nil>
}

// A bad DSN fails Open with one line that names the problem and masks the password.
func ExampleOpen_badDSN() {
	_, err := open.Open(context.Background(), "postgres://app:s3cret@db.example.com:5432/app?sslmode=verify-ful")
	fmt.Println(err)
	_, err = open.Open(context.Background(), "memcached://app:s3cret@cache:11211")
	fmt.Println(err)
	// Output:
	// simba: invalid option: sql postgres DSN "postgres://app:xxxxx@db.example.com:5432/app?sslmode=verify-ful": failed to configure TLS (sslmode is invalid)
	// simba: invalid option: DSN "memcached://app:xxxxx@cache:11211": unknown scheme "memcached" (want postgres://, postgresql://, mysql://, sqlite://, redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel://, zk://, zk+tls://, etcd:// or etcd+tls://)
}
