package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/simba-go/simba/chaos/servers"
)

// backendDSN returns the DSN of backend kind: a private server when private (or always for
// redis, zk and etcd, cheap to start and leaving nothing on the shared ones), else the shared
// PostgreSQL or MariaDB. srv is nil for a shared server and for SQLite.
func backendDSN(ctx context.Context, kind, root string, private bool) (dsn string, srv *servers.Server, err error) {
	_ = os.Chmod(root, 0o755)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch kind {
	case "sqlite":
		return "sqlite://" + filepath.Join(root, "simba.db"), nil, nil
	case "pg":
		if !private {
			return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", nil, nil
		}
		srv, err = servers.Postgres(ctx, root)
		if err != nil {
			return "", nil, err
		}
		return "postgres://postgres@" + srv.Addr() + "/test?sslmode=disable", srv, nil
	case "mysql":
		if !private {
			return "mysql://root@127.0.0.1:3306/test", nil, nil
		}
		srv, err = servers.MariaDB(ctx, root)
		if err != nil {
			return "", nil, err
		}
		return "mysql://root@" + srv.Addr() + "/test", srv, nil
	case "redis":
		srv, err = servers.Redis(ctx, root, true)
		if err != nil {
			return "", nil, err
		}
		return "redis://" + srv.Addr() + "/0", srv, nil
	case "zk":
		srv, err = servers.ZooKeeper(ctx, root)
		if err != nil {
			return "", nil, err
		}
		return "zk://" + srv.Addr() + "/t29?tickTime=200ms", srv, nil
	case "etcd":
		srv, err = servers.Etcd(ctx, root)
		if err != nil {
			return "", nil, err
		}
		return "etcd://" + srv.Addr() + "/t29", srv, nil
	}
	return "", nil, fmt.Errorf("unknown backend %q", kind)
}
