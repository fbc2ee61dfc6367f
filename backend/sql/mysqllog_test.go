package sql

import (
	"database/sql"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testenv"
)

// TestMySQLDriverLogsToTheBackendsLogger: what go-sql-driver/mysql logs on a broken connection
// ("closing bad idle connection: EOF", after the link cut every pooled connection) goes to the
// logger of the backend whose connection it was (WithLogger), at DEBUG, and not to the other
// backend's. It went to the driver's process-wide logger: the user's stderr, behind the
// program's back; on the old code the backend's logger never sees a line of the driver's.
func TestMySQLDriverLogsToTheBackendsLogger(t *testing.T) {
	direct, _ := myDatabase(t, "simba_sqllog_")
	proxied, p := proxyDSN(t, direct, "3306")
	var logs, otherLogs testenv.LogBuffer
	b := migrated(t, proxied, WithHousekeepingInterval(-1), WithLogger(logs.Logger()))
	other := open(t, direct, WithHousekeepingInterval(-1), WithLogger(otherLogs.Logger()))
	ctx := testCtx(t)
	if _, err := other.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	cutUntilDriverLogs(t, b, p, &logs)
	if strings.Contains(otherLogs.String(), driverLine) {
		t.Errorf("the other backend's logger has the driver's lines of this one:\n%s", otherLogs.String())
	}
}

// TestMySQLDriverLogKeepsTheProgramsLogger: a logger the program set with mysql.SetLogger
// before the configuration was made is kept; only the driver's own default (stderr) is
// replaced, and the process-wide logger is never changed.
func TestMySQLDriverLogKeepsTheProgramsLogger(t *testing.T) {
	cfg, err := MySQLConfig("mysql://u@h/db")
	if err != nil {
		t.Fatal(err)
	}
	if !isMySQLDefaultLogger(cfg.Logger) {
		t.Fatalf("a new configuration's logger %#v is not taken for the driver's default", cfg.Logger)
	}
	routeMySQLDriverLog(cfg, nil)
	if _, ok := cfg.Logger.(mysqlDriverLog); !ok {
		t.Fatalf("the driver's default logger was not replaced: %#v", cfg.Logger)
	}
	fresh := mysqldriver.NewConfig()
	if !isMySQLDefaultLogger(fresh.Logger) {
		t.Fatalf("routing one configuration changed the process-wide logger: %#v", fresh.Logger)
	}
	for _, own := range []mysqldriver.Logger{&mysqldriver.NopLogger{}, log.New(os.Stderr, "mine ", 0), log.New(os.Stdout, "[mysql] ", 0)} {
		cfg := mysqldriver.NewConfig()
		cfg.Logger = own // as mysql.SetLogger(own) before the configuration was made
		routeMySQLDriverLog(cfg, nil)
		if cfg.Logger != own {
			t.Errorf("the program's logger %#v was replaced by %#v", own, cfg.Logger)
		}
	}
}

// TestMySQLConnectorPoolLogsToTheBackendsLogger: a pool the program makes itself, as NewMySQL's
// doc says (MySQLConfig, MySQLConnector, sql.OpenDB), sends the driver's lines to the logger of
// the backend made on it (WithLogger), at DEBUG, as Open's pool does. On the old code they went
// to the driver's stderr logger unless the program set the configuration's Logger itself
// (trial 31: ~230 "[mysql] packets.go:58 unexpected EOF" lines on stderr in one fault run), and
// the backend's logger never saw one. The caller's configuration is left as it was.
func TestMySQLConnectorPoolLogsToTheBackendsLogger(t *testing.T) {
	direct, _ := myDatabase(t, "simba_sqlconnlog_")
	proxied, p := proxyDSN(t, direct, "3306")
	cfg, err := MySQLConfig(proxied)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := MySQLConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !isMySQLDefaultLogger(cfg.Logger) {
		t.Errorf("MySQLConnector changed the caller's configuration's Logger to %#v", cfg.Logger)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	var logs testenv.LogBuffer
	b, err := NewMySQL(db, WithHousekeepingInterval(-1), WithLogger(logs.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cutUntilDriverLogs(t, b, p, &logs)
}

// driverLine marks the driver's lines in a backend's log.
const driverLine = `driver=go-sql-driver/mysql`

// cutUntilDriverLogs cuts b's link (through p) under an idle pooled connection until the driver
// logs a line of its own ("closing bad idle connection"), and checks that logs has it at DEBUG.
func cutUntilDriverLogs(t *testing.T, b *Backend, p *faultproxy.Proxy, logs *testenv.LogBuffer) {
	t.Helper()
	for i := 0; !strings.Contains(logs.String(), driverLine); i++ {
		if i == 20 {
			t.Fatalf("20 cuts of the link, and the backend's logger has no line of the driver's:\n%s", logs.String())
		}
		openSession(t, b, time.Minute) // a connection now idle in the pool
		p.Set(faultproxy.Fault{Cut: true})
		p.Heal()
		openSession(t, b, time.Minute) // the driver finds the idle one closed, logs, and dials again
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("the driver's lines are not at DEBUG:\n%s", logs.String())
	}
}
