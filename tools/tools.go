//go:build tools

// Package tools pins the heavy code generators Simba's build uses (sqlc), in a module of their
// own so that users of the library never download them.
package tools

import (
	_ "github.com/sqlc-dev/sqlc/cmd/sqlc"
)
