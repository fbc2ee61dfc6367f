// Package spec holds no Go code of its own: the wire spec is the YAML beside this file. It is a
// package only to carry the go:generate lines that rebuild every artifact from the spec
// (`go generate ./...` from the repository root, or `make generate`).
//
// The lines live here, not in the root package, because `go generate ./...` lists every
// package's files before it runs the first line, and runs packages in import-path order: the
// generator deletes the artifacts of statements removed from the spec, and a package under
// generated/ still to be visited would then name a file that is gone ("open …: no such
// file"). spec sorts after generated, so every generated package has been visited by then.
package spec

//go:generate go -C ../gen run ./cmd/simbagen -root ..
//go:generate go -C ../tools run github.com/sqlc-dev/sqlc/cmd/sqlc generate -f ../sql/sqlc.yaml
//go:generate go -C ../gen run ./cmd/simbagen -check-int64 ../generated/sqlc
//go:generate go -C ../gen run ./cmd/simbagen -root .. -sqlq
