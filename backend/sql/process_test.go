package sql

import "os"

// child reports whether this test binary runs as the child process of a multi-process test
// (and if so has done its work).
func child() bool { return os.Getenv(childEnv) != "" && runChild() }

const childEnv = "SIMBA_SQL_CHILD"

func runChild() bool { return false }
