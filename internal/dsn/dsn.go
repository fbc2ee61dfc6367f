// Package dsn holds what every backend's DSN handling shares.
package dsn

import "strings"

// Redact hides the password of a URL-shaped DSN for messages and logs:
// "scheme://user:secret@host…" becomes "scheme://user:xxxxx@host…". Hosts may be a
// comma-separated list (Redis Cluster, ZooKeeper ensembles) and the password may contain any
// character, '/' and '@' included. A DSN without a password is returned unchanged.
func Redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return dsn
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass || strings.ContainsAny(user, "/?#") {
		return dsn // the '@' is not part of a user:password
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
