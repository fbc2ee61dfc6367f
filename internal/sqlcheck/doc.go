// Package sqlcheck holds the tests that run Simba's generated SQL against real databases:
// the migrations of every dialect apply twice in a row to PostgreSQL, MariaDB/MySQL and SQLite,
// every generated query prepares on the server of its dialect, and the statements behave as the
// wire protocol says (grants, fencing tokens, expiry, release, membership, housekeeping, races
// and contention) when driven through the production backend's public SPI (backend/sql), so
// that they test the code users run. It has no non-test code.
package sqlcheck
