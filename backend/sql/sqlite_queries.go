package sql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/simba-go/simba/generated/sqlc/sqlite"
	"github.com/simba-go/simba/spi"
)

// sqliteQ adapts the generated sqlite queries to stdQueries.
type sqliteQ struct{ q *sqlite.Queries }

func (a sqliteQ) openSession(ctx context.Context, id, owner string, ttlMs int64) error {
	return a.q.OpenSession(ctx, sqlite.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttlMs})
}

// renew runs KeepAliveRenew: no row is expired.
func (a sqliteQ) renew(ctx context.Context, sid string) (int64, bool, error) {
	rem, err := a.q.KeepAliveRenew(ctx, sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return rem, err == nil, err
}

func (a sqliteQ) held(ctx context.Context, sid string) ([]spi.Held, error) {
	rows, err := a.q.KeepAliveHeld(ctx, sid)
	if err != nil {
		return nil, err
	}
	out := make([]spi.Held, len(rows))
	for i, r := range rows {
		out[i] = spi.Held{Name: r.Name, Token: r.Token}
	}
	return out, nil
}

func (a sqliteQ) keepAliveMembers(ctx context.Context, groups []string) ([]member, error) {
	rows, err := a.q.KeepAliveMembers(ctx, groups)
	return sqliteMembers(rows), err
}

func sqliteMembers(rows []sqlite.SimbaMember) []member {
	out := make([]member, len(rows))
	for i, r := range rows {
		out[i] = member{group: r.GroupName, session: r.SessionID}
	}
	return out
}

func (a sqliteQ) closeRelease(ctx context.Context, sid string) error {
	return a.q.CloseSessionRelease(ctx, sid)
}
func (a sqliteQ) closeLeave(ctx context.Context, sid string) error {
	return a.q.CloseSessionLeave(ctx, sid)
}
func (a sqliteQ) closeDelete(ctx context.Context, sid string) error {
	return a.q.CloseSessionDelete(ctx, sid)
}
func (a sqliteQ) lockSession(ctx context.Context, sid string) (int64, error) {
	return a.q.AcquireLockSession(ctx, sid)
}
func (a sqliteQ) ensureLease(ctx context.Context, name string) error {
	return a.q.AcquireEnsureLease(ctx, name)
}

func (a sqliteQ) readLease(ctx context.Context, name string) (readLease, error) {
	r, err := a.q.AcquireReadLease(ctx, name)
	return readLease{holder: r.HolderID, token: r.Token, nextToken: r.NextToken, owner: r.HolderOwner, remainingMs: r.HolderRemainingMs}, err
}

func (a sqliteQ) take(ctx context.Context, sid, name string, token int64) error {
	return a.q.AcquireTake(ctx, sqlite.AcquireTakeParams{NextToken: token, SessionID: sid, Name: name})
}

func (a sqliteQ) release(ctx context.Context, sid, name string, token int64) error {
	return a.q.ReleaseNoNotify(ctx, sqlite.ReleaseNoNotifyParams{Name: name, SessionID: sid, Token: token})
}

func (a sqliteQ) joinInsert(ctx context.Context, sid, group string) error {
	return a.q.JoinInsert(ctx, sqlite.JoinInsertParams{GroupName: group, SessionID: sid})
}

func (a sqliteQ) leaveDelete(ctx context.Context, sid, group string) error {
	return a.q.LeaveDelete(ctx, sqlite.LeaveDeleteParams{GroupName: group, SessionID: sid})
}

func (a sqliteQ) sessionRemaining(ctx context.Context, sid string) (int64, error) {
	return a.q.SessionRemaining(ctx, sid)
}
func (a sqliteQ) members(ctx context.Context, group string) ([]string, error) {
	return a.q.Members(ctx, group)
}
func (a sqliteQ) housekeepingMembers(ctx context.Context) error { return a.q.HousekeepingMembers(ctx) }
func (a sqliteQ) housekeepingSessions(ctx context.Context) error {
	return a.q.HousekeepingSessions(ctx)
}

func (a sqliteQ) inspectLeases(ctx context.Context) ([]lease, error) {
	rows, err := a.q.InspectLeases(ctx)
	out := make([]lease, len(rows))
	for i, r := range rows {
		out[i] = lease{name: r.Name, holder: r.HolderID, owner: r.Owner, token: r.Token, remainingMs: r.RemainingMs}
	}
	return out, err
}

func (a sqliteQ) inspectSessions(ctx context.Context) ([]session, error) {
	rows, err := a.q.InspectSessions(ctx)
	out := make([]session, len(rows))
	for i, r := range rows {
		out[i] = session{id: r.ID, owner: r.Owner, remainingMs: r.RemainingMs}
	}
	return out, err
}

func (a sqliteQ) inspectMembers(ctx context.Context) ([]member, error) {
	rows, err := a.q.InspectMembers(ctx)
	return sqliteMembers(rows), err
}

func (a sqliteQ) schemaVersion(ctx context.Context) (int64, error) { return a.q.SchemaVersion(ctx) }
func (a sqliteQ) databaseNow(ctx context.Context) (int64, error)   { return a.q.DatabaseNow(ctx) }

func (a sqliteQ) clearForeignHolder(ctx context.Context, name, holder string) error {
	return a.q.ClearForeignHolder(ctx, sqlite.ClearForeignHolderParams{Name: name, SessionID: holder})
}
