package sql

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// gateChildEnv makes the test binary a process that holds one byte of a SQLite file's
// cross-process gate: "<byte>:<database file>". It prints "held" once it holds it, and lets it
// go and exits when its stdin closes.
const gateChildEnv = "SIMBA_SQL_GATE_CHILD"

// gateChild runs the gate child's part when the binary was started as one, and reports whether
// it did.
func gateChild() bool {
	v := os.Getenv(gateChildEnv)
	if v == "" {
		return false
	}
	off, path, _ := strings.Cut(v, ":")
	n, err := strconv.ParseInt(off, 10, 64)
	lk := openGate(path)
	if err != nil || lk == nil {
		fmt.Fprintln(os.Stderr, "gate child: bad", v, err)
		os.Exit(2)
	}
	if err := lk.lock(n); err != nil {
		fmt.Fprintln(os.Stderr, "gate child:", err)
		os.Exit(2)
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	lk.unlock(n)
	os.Exit(0)
	return true
}
