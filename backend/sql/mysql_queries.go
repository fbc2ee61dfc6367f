package sql

import (
	"context"

	"github.com/simba-go/simba/generated/sqlc/mysql"
	"github.com/simba-go/simba/spi"
)

// mysqlQ adapts the generated mysql queries to stdQueries.
type mysqlQ struct{ q *mysql.Queries }

func (a mysqlQ) openSession(ctx context.Context, id, owner string, ttlMs int64) error {
	return a.q.OpenSession(ctx, mysql.OpenSessionParams{ID: id, Owner: owner, TtlMs: ttlMs})
}

// renew runs KeepAliveRenewNoReturn, then SessionRemaining (MariaDB has no UPDATE ...
// RETURNING and reports changed rather than matched rows): no row or ≤ 0 is expired.
func (a mysqlQ) renew(ctx context.Context, sid string) (int64, bool, error) {
	if err := a.q.KeepAliveRenewNoReturn(ctx, sid); err != nil {
		return 0, false, err
	}
	rem, err := a.q.SessionRemaining(ctx, sid)
	ok, err := live(rem, err)
	return rem, ok, err
}

func (a mysqlQ) held(ctx context.Context, sid string) ([]spi.Held, error) {
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

func (a mysqlQ) keepAliveMembers(ctx context.Context, groups []string) ([]member, error) {
	rows, err := a.q.KeepAliveMembers(ctx, groups)
	return mysqlMembers(rows), err
}

func mysqlMembers(rows []mysql.SimbaMember) []member {
	out := make([]member, len(rows))
	for i, r := range rows {
		out[i] = member{group: r.GroupName, session: r.SessionID}
	}
	return out
}

func (a mysqlQ) closeRelease(ctx context.Context, sid string) error {
	return a.q.CloseSessionRelease(ctx, sid)
}
func (a mysqlQ) closeLeave(ctx context.Context, sid string) error {
	return a.q.CloseSessionLeave(ctx, sid)
}
func (a mysqlQ) closeDelete(ctx context.Context, sid string) error {
	return a.q.CloseSessionDelete(ctx, sid)
}
func (a mysqlQ) lockSession(ctx context.Context, sid string) (int64, error) {
	return a.q.AcquireLockSession(ctx, sid)
}
func (a mysqlQ) ensureLease(ctx context.Context, name string) error {
	return a.q.AcquireEnsureLease(ctx, name)
}

func (a mysqlQ) readLease(ctx context.Context, name string) (readLease, error) {
	r, err := a.q.AcquireReadLease(ctx, name)
	return readLease{holder: r.HolderID, token: r.Token, nextToken: r.NextToken, owner: r.HolderOwner, remainingMs: r.HolderRemainingMs}, err
}

func (a mysqlQ) take(ctx context.Context, sid, name string, token int64) error {
	return a.q.AcquireTake(ctx, mysql.AcquireTakeParams{NextToken: token, SessionID: sid, Name: name})
}

func (a mysqlQ) release(ctx context.Context, sid, name string, token int64) error {
	return a.q.ReleaseNoNotify(ctx, mysql.ReleaseNoNotifyParams{Name: name, SessionID: sid, Token: token})
}

func (a mysqlQ) joinInsert(ctx context.Context, sid, group string) error {
	return a.q.JoinInsert(ctx, mysql.JoinInsertParams{GroupName: group, SessionID: sid})
}

func (a mysqlQ) leaveDelete(ctx context.Context, sid, group string) error {
	return a.q.LeaveDelete(ctx, mysql.LeaveDeleteParams{GroupName: group, SessionID: sid})
}

func (a mysqlQ) sessionRemaining(ctx context.Context, sid string) (int64, error) {
	return a.q.SessionRemaining(ctx, sid)
}
func (a mysqlQ) members(ctx context.Context, group string) ([]string, error) {
	return a.q.Members(ctx, group)
}
func (a mysqlQ) housekeepingMembers(ctx context.Context) error  { return a.q.HousekeepingMembers(ctx) }
func (a mysqlQ) housekeepingSessions(ctx context.Context) error { return a.q.HousekeepingSessions(ctx) }

func (a mysqlQ) inspectLeases(ctx context.Context) ([]lease, error) {
	rows, err := a.q.InspectLeases(ctx)
	out := make([]lease, len(rows))
	for i, r := range rows {
		out[i] = lease{name: r.Name, holder: r.HolderID, owner: r.Owner, token: r.Token, remainingMs: r.RemainingMs}
	}
	return out, err
}

func (a mysqlQ) inspectSessions(ctx context.Context) ([]session, error) {
	rows, err := a.q.InspectSessions(ctx)
	out := make([]session, len(rows))
	for i, r := range rows {
		out[i] = session{id: r.ID, owner: r.Owner, remainingMs: r.RemainingMs}
	}
	return out, err
}

func (a mysqlQ) inspectMembers(ctx context.Context) ([]member, error) {
	rows, err := a.q.InspectMembers(ctx)
	return mysqlMembers(rows), err
}

func (a mysqlQ) schemaVersion(ctx context.Context) (int64, error) { return a.q.SchemaVersion(ctx) }
func (a mysqlQ) databaseNow(ctx context.Context) (int64, error)   { return a.q.DatabaseNow(ctx) }

func (a mysqlQ) clearForeignHolder(ctx context.Context, name, holder string) error {
	return a.q.ClearForeignHolder(ctx, mysql.ClearForeignHolderParams{Name: name, SessionID: holder})
}
