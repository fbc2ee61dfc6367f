package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// statusJSONScenario holds, on b, under the prefix p: the lock p+"job" (session a, whose owner
// has a quote and a non-ASCII letter), the partition lease p+"grp.0" of the group p+"grp"
// (session m, its live member), and the free lease p+"free" (held by a and released). It
// checks that simba status -json parses and says what the tables say, row for row: each
// lease's name, token, session, owner and time left (0 ms where the table shows "-"), each
// session, each group's members; that -name finds a group with "found": true and a name that
// matches nothing gives "found": false and a notFoundError (exit status 3).
func statusJSONScenario(t *testing.T, ctx context.Context, dsn string, b spi.Backend, p string) {
	t.Helper()
	open := func(owner string) spi.Session {
		s, err := b.OpenSession(ctx, owner, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.CloseSession(context.Background(), s.ID) })
		return s
	}
	a, m := open(`web"1"é`), open("member-2")
	acquire := func(s spi.Session, name string) spi.Acquire {
		got, err := b.Acquire(ctx, s.ID, name)
		if err != nil || got.Kind != spi.Granted {
			t.Fatalf("acquire %s: %+v, %v", name, got, err)
		}
		return got
	}
	acquire(a, p+"job")
	acquire(m, p+"grp.0")
	if _, err := b.Join(ctx, m.ID, p+"grp"); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, a.ID, p+"free", acquire(a, p+"free").Token); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		t.Helper()
		var buf bytes.Buffer
		err := statusTo(ctx, &buf, append([]string{"-dsn", dsn}, args...))
		t.Logf("simba status %q: %v\n%s", args, err, buf.String())
		return buf.String(), err
	}
	decode := func(out string) statusDoc {
		t.Helper()
		var doc statusDoc
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("-json output does not parse: %v\n%s", err, out)
		}
		if dec.More() {
			t.Fatalf("-json output holds more than one document:\n%s", out)
		}
		return doc
	}
	text, err := run("-prefix", p, "-all")
	if err != nil {
		t.Fatal(err)
	}
	js, err := run("-prefix", p, "-all", "-json")
	if err != nil {
		t.Fatal(err)
	}
	doc := decode(js)
	// "found" goes with a selection: -prefix P (on SQLite the scenario's P is "", no selection).
	if doc.Prefix != p || doc.Name != "" || (doc.Found == nil) != (p == "") || (doc.Found != nil && !*doc.Found) || doc.FreeLeases != 1 {
		t.Errorf("prefix %q, name %q, found %v, free_leases %d; want %q, none, true (absent without a prefix), 1", doc.Prefix, doc.Name, doc.Found, doc.FreeLeases, p)
	}
	tables := strings.Split(strings.TrimSuffix(text, "\n"), "\n\n")
	if len(tables) != 3 {
		t.Fatalf("want 3 tables, got %d:\n%s", len(tables), text)
	}
	rowsOf := func(table string) [][]string {
		var rows [][]string
		for _, line := range strings.Split(table, "\n")[1:] {
			rows = append(rows, strings.Fields(line))
		}
		return rows
	}
	leases := rowsOf(tables[0])
	if len(leases) != 3 || len(doc.Leases) != 3 {
		t.Fatalf("%d lease rows, %d JSON leases; want 3 of each", len(leases), len(doc.Leases))
	}
	for i, l := range doc.Leases {
		row := leases[i]
		want := []string{safe(l.Name), strconv.FormatInt(l.Token, 10), orDash(safe(string(l.Session))), orDash(safe(l.Owner))}
		if strings.Join(row[:4], " ") != strings.Join(want, " ") {
			t.Errorf("lease row %q, JSON %+v", row, l)
		}
		switch {
		case row[4] == "-" && (l.RemainingMillis != 0 || l.Session != ""):
			t.Errorf("free lease row %q, JSON %+v: want session \"\" and remaining_ms 0", row, l)
		case row[4] != "-":
			d, err := time.ParseDuration(row[4])
			if err != nil || l.RemainingMillis <= 0 || l.RemainingMillis > time.Minute.Milliseconds() ||
				(d-time.Duration(l.RemainingMillis)*time.Millisecond).Abs() > 10*time.Second {
				t.Errorf("held lease row %q, JSON remaining_ms %d: want the same time left", row, l.RemainingMillis)
			}
		}
	}
	byName := map[string]statusLease{}
	for _, l := range doc.Leases {
		byName[l.Name] = l
	}
	if l := byName[p+"job"]; l.Session != a.ID || l.Owner != `web"1"é` {
		t.Errorf("%sjob in JSON: %+v; want session %s and the owner as it is", p, l, a.ID)
	}
	if l := byName[p+"free"]; l.Session != "" || l.Owner != "" || l.Token == 0 {
		t.Errorf("%sfree in JSON: %+v; want free with its token", p, l)
	}
	sessions := rowsOf(tables[1])
	if len(sessions) != len(doc.Sessions) || len(sessions) != 2 {
		t.Fatalf("%d session rows, %d JSON sessions; want 2 of each", len(sessions), len(doc.Sessions))
	}
	for i, s := range doc.Sessions {
		if row := sessions[i]; row[0] != safe(string(s.ID)) || row[1] != orDash(safe(s.Owner)) || s.RemainingMillis <= 0 {
			t.Errorf("session row %q, JSON %+v", row, s)
		}
	}
	groups := rowsOf(tables[2])
	if len(groups) != 1 || len(doc.Groups) != 1 || doc.Groups[0].Name != p+"grp" ||
		fmt.Sprint(doc.Groups[0].Members) != fmt.Sprint([]string{string(m.ID)}) || groups[0][0] != p+"grp" ||
		groups[0][1] != "["+string(m.ID)+"]" {
		t.Errorf("group rows %q, JSON %+v; want %sgrp with member %s", groups, doc.Groups, p, m.ID)
	}

	js, err = run("-name", p+"grp", "-json")
	if err != nil {
		t.Fatal(err)
	}
	doc = decode(js)
	if doc.Name != p+"grp" || doc.Found == nil || !*doc.Found || len(doc.Leases) != 1 || doc.Leases[0].Name != p+"grp.0" ||
		len(doc.Groups) != 1 || len(doc.Sessions) != 1 || doc.Sessions[0].ID != m.ID {
		t.Errorf("-name %sgrp -json: %+v; want found, the lease grp.0, the group and its member", p, doc)
	}
	js, err = run("-name", p+"nosuch", "-json")
	var nf notFoundError
	if !errors.As(err, &nf) || exitStatusOf(ctx, err) != 3 {
		t.Errorf("-name %snosuch -json: error %v (exit status %d); want a notFoundError, exit status 3", p, err, exitStatusOf(ctx, err))
	}
	doc = decode(js)
	if doc.Name != p+"nosuch" || doc.Found == nil || *doc.Found || len(doc.Leases)+len(doc.Sessions)+len(doc.Groups) != 0 {
		t.Errorf("-name %snosuch -json: %+v; want found false and nothing listed", p, doc)
	}
}

// TestStatusJSONOnSQLite: simba status -json says what the tables say (statusJSONScenario).
// Before, -json was an unknown flag: exit status 2 and the help.
func TestStatusJSONOnSQLite(t *testing.T) {
	ctx, dsn, b := sqliteStatusBackend(t)
	statusJSONScenario(t, ctx, dsn, b, "")
}

// TestStatusJSONOnRedis: the same on the shared Redis server, under a prefix of this run's own
// (its records stay, as every test's on the shared servers).
func TestStatusJSONOnRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := "redis://" + testenv.Redis(t) + "/0"
	b, err := openDSN(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	statusJSONScenario(t, ctx, dsn, b, fmt.Sprintf("cli-json-%d-", time.Now().UnixNano()))
}

// TestStatusNameExitStatuses: simba status -name N exits 3 with one line on stderr when nothing
// has that name (with -json, the document on stdout says "found": false), 0 for a name that is
// there, and 2 with the reason for a name lock and run refuse (a/b); -prefix P exits 3 and 0
// alike. Before, the unknown name exited 0, as if free, and a/b was accepted; a -prefix that
// matched nothing exited 0 with empty tables, and its -json had no "found".
func TestStatusNameExitStatuses(t *testing.T) {
	ctx, dsn, b := sqliteStatusBackend(t)
	s, err := b.OpenSession(ctx, "there", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Acquire(ctx, s.ID, "deploy"); err != nil || got.Kind != spi.Granted {
		t.Fatalf("acquire: %+v, %v", got, err)
	}
	b.Close()

	stdout, stderr, status := runSimba(t, "status", "-dsn", dsn, "-name", "deplyo")
	if status != 3 || stdout != "" || stderr != "simba: no lease, lock or group named deplyo (no lease record deplyo or deplyo.<n>, no group deplyo with live members)\n" {
		t.Errorf("status -name deplyo: exit status %d, stdout %q, stderr %q; want 3, nothing, one line", status, stdout, stderr)
	}
	stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-name", "deplyo", "-json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); status != 3 || err != nil || doc["found"] != false || doc["name"] != "deplyo" ||
		!strings.HasPrefix(stderr, "simba: no lease, lock or group named deplyo") {
		t.Errorf("status -name deplyo -json: exit status %d, stdout %q (%v), stderr %q; want 3, found false, the line", status, stdout, err, stderr)
	}
	stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-name", "deploy", "-json")
	if err := json.Unmarshal([]byte(stdout), &doc); status != 0 || err != nil || doc["found"] != true || stderr != "" {
		t.Errorf("status -name deploy -json: exit status %d, stdout %q (%v), stderr %q; want 0 and found true", status, stdout, err, stderr)
	}

	// -prefix P is the same: 3 when no name starts with P (grep's 1 for no line selected,
	// which scripts test as `if simba status -prefix P >/dev/null`), 0 when one does.
	stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-prefix", "depo")
	if status != 3 || stdout != "" || stderr != "simba: no lease, lock or group whose name starts with depo (no lease record, no group with live members)\n" {
		t.Errorf("status -prefix depo: exit status %d, stdout %q, stderr %q; want 3, nothing, one line", status, stdout, stderr)
	}
	doc = nil
	stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-prefix", "depo", "-json")
	if err := json.Unmarshal([]byte(stdout), &doc); status != 3 || err != nil || doc["found"] != false || doc["prefix"] != "depo" ||
		!strings.HasPrefix(stderr, "simba: no lease, lock or group whose name starts with depo") {
		t.Errorf("status -prefix depo -json: exit status %d, stdout %q (%v), stderr %q; want 3, found false, the line", status, stdout, err, stderr)
	}
	doc = nil
	stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-prefix", "dep", "-json")
	if err := json.Unmarshal([]byte(stdout), &doc); status != 0 || err != nil || doc["found"] != true || stderr != "" {
		t.Errorf("status -prefix dep -json: exit status %d, stdout %q (%v), stderr %q; want 0 and found true", status, stdout, err, stderr)
	}
	if stdout, stderr, status = runSimba(t, "status", "-dsn", dsn, "-prefix", "dep"); status != 0 || !strings.Contains(stdout, "deploy") || stderr != "" {
		t.Errorf("status -prefix dep: exit status %d, stdout %q, stderr %q; want 0 and the lease deploy", status, stdout, stderr)
	}
	for _, cmd := range []string{"status", "lock"} {
		args := []string{cmd, "-dsn", dsn, "-name", "a/b"}
		if cmd == "lock" {
			args = append(args, "--", "true")
		}
		stdout, stderr, status = runSimba(t, args...)
		if status != 2 || stdout != "" || !strings.HasPrefix(stderr, "simba: -name: invalid name") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("simba %s -name a/b: exit status %d, stdout %q, stderr %q; want 2 and one line with the reason", cmd, status, stdout, stderr)
		}
	}
}

// TestBadFlagValueIsTwoLines: a bad value of a flag the command has prints the problem and a
// pointer to -h, not the whole help, which an unknown flag still prints (it lists the flags
// there are). Before, `simba lock -ttl x` printed some 75 lines.
func TestBadFlagValueIsTwoLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "-ttl", "x", "-name", "n", "--", "true"}, "simba: lock: invalid value \"x\" for flag -ttl: parse error\nrun 'simba lock -h' for help\n"},
		{[]string{"status", "-all=maybe"}, "simba: status: invalid boolean value \"maybe\" for -all: parse error\nrun 'simba status -h' for help\n"},
		{[]string{"status", "-name"}, "simba: status: flag needs an argument: -name\nrun 'simba status -h' for help\n"},
	} {
		stdout, stderr, status := runSimba(t, tc.args...)
		if status != 2 || stdout != "" || stderr != tc.want {
			t.Errorf("simba %q: exit status %d, stdout %q, stderr %q; want 2 and %q", tc.args, status, stdout, stderr, tc.want)
		}
	}
}
