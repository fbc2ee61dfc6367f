// Package simba is a Go library for leader election, distributed locks and partitioned
// leadership with fencing tokens, over PostgreSQL, MySQL/MariaDB, SQLite, Redis (standalone and
// Cluster) and ZooKeeper.
//
// The wire artifacts every backend uses (SQL, Lua, the ZooKeeper layout and the Go under
// generated/) come from the declarative spec in spec/; `go generate ./...` rebuilds them.
package simba

//go:generate go -C gen run ./cmd/simbagen -root ..
