package sql

import "fmt"

// What a read-only server's refusal of a write tells to check (errReadOnly).
const (
	pgReadOnlyHint = "the PostgreSQL server is read-only: a hot standby (a primary demoted, or a failover that left the DSN's address on a standby) or default_transaction_read_only=on; " +
		"check SELECT pg_is_in_recovery(), current_setting('transaction_read_only') on the server the DSN reaches " +
		"(with several hosts in the DSN, target_session_attrs=read-write picks the writable one)"
	mysqlReadOnlyHint = "the MySQL/MariaDB server is read-only: a replica (a primary demoted, or a failover that left the DSN's address on a replica) or read_only/super_read_only set; " +
		"check SELECT @@global.read_only (and @@global.super_read_only on MySQL) on the server the DSN reaches"
)

// readOnlyError is a write the server refused because it is read-only. Retryable (it wraps
// the driver's error, which the dialect's classify wraps in spi.Unavailable): a failover may
// make the server behind the DSN writable again.
type readOnlyError struct {
	hint string
	err  error
}

func (e *readOnlyError) Error() string { return fmt.Sprintf("%s: %v", e.hint, e.err) }
func (e *readOnlyError) Unwrap() error { return e.err }

// errReadOnly wraps err, a write refused by a read-only server, in a message that says so and
// what to check (hint).
func errReadOnly(hint string, err error) error { return &readOnlyError{hint: hint, err: err} }
