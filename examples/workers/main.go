// Command workers processes a queue of jobs, each about one invoice, on a pool of goroutines,
// and takes a lock per invoice (invoice-0, invoice-1, …) around each job: no two workers, of
// this process or of any other on the same database, work on one invoice at once. Locks are
// calls, not objects: the client keeps nothing of an invoice's lock once it is unlocked, so
// the number of invoices costs nothing.
//
// Each job reads the invoice's balance from a ledger and writes it back increased, two steps
// that would lose updates without the lock; the ledger (a SQLite file standing for your
// database, -ledger) also refuses a write whose fencing token is lower than one it has seen
// for that invoice, through package fence/fencesql: that is what keeps a worker that lost its
// lock (a paused process, a partition) from writing.
//
// Goroutines of one process that want the same invoice take turns in the order they asked.
// Across processes, a waiter is woken within milliseconds of the release on every backend:
// NOTIFY on PostgreSQL, pub/sub on Redis, watches on ZooKeeper and etcd, a named lock the holder
// keeps on MySQL/MariaDB, and a watch of the database file on SQLite (see backend/sql's doc);
// and waiting processes take the lock in the order they came (a waiter gets it after at most as
// many tenures as there were waiters ahead of it).
//
//	go run ./examples/workers -workers 8 -invoices 5 -jobs 40
//	go run ./examples/workers -ledger /tmp/ledger.db   # and again in a second terminal
//	go run ./examples/workers -dsn 'mysql://root@127.0.0.1:3306/test'
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
	"github.com/simba-go/simba/fence/fencesql"
)

func main() { cli.Main("workers", run) }

// run processes -jobs jobs, or as many as it can before ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := cli.NewFlags("workers", cli.SQLiteDSN, cli.SQLUsage, 30*time.Second)
	prefix := flags.String("prefix", "invoice", "the locks are named <prefix>-<invoice number>")
	workers := flags.Int("workers", 8, "how many goroutines process jobs")
	invoices := flags.Int("invoices", 5, "how many invoices the jobs are about")
	jobs := flags.Int("jobs", 40, "how many jobs to process")
	ledgerPath := flags.String("ledger", "", "the ledger's SQLite file, to share it between processes (default: a new file for this run)")
	if ok, err := flags.Parse(args); !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flags.For)
	defer cancel()

	backend, err := simbasql.Open(ctx, flags.DSN, simbasql.WithAutoMigrate())
	if err != nil {
		return err
	}
	defer backend.Close()
	client, err := simba.New(backend) // the default TTL: it matters only if a process dies holding a lock
	if err != nil {
		return err
	}
	defer client.Close(context.WithoutCancel(ctx))

	queue := make(chan int, *jobs)
	for job := range *jobs {
		queue <- job
	}
	close(queue)

	books, err := openLedger(ctx, *ledgerPath)
	if err != nil {
		return err
	}
	defer books.close()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
	)
	for w := range *workers {
		wg.Go(func() {
			for job := range queue {
				invoice := fmt.Sprintf("%s-%d", *prefix, job%*invoices)
				written := false
				err := client.WithLock(ctx, invoice, func(ctx context.Context, t simba.Term) error {
					// Under the lock: this worker alone works on this invoice. ctx ends if the
					// lock is lost; every write carries the token.
					balance, err := books.balance(ctx, invoice)
					if err != nil {
						return err
					}
					if err := books.write(ctx, invoice, balance+1, t.Token()); err != nil {
						return err
					}
					written = true
					fmt.Fprintf(stdout, "worker %d: job %d on %s with token %d\n", w, job, invoice, t.Token())
					return nil
				})
				if err != nil && written {
					// The job is done; only the unlock failed (say, a timeout). The lease is
					// then freed by the next keep-alives, or expires with the TTL.
					fmt.Fprintf(stdout, "worker %d: job %d done, but %v\n", w, job, err)
					err = nil
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("job %d: %w", job, err))
				} else {
					done++
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()

	total, err := books.total(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d of %d jobs done by %d workers; the ledger counts %d\n", done, *jobs, *workers, total)
	if ctx.Err() != nil { // -for passed or interrupted: not an error
		return nil
	}
	return errors.Join(errs...)
}

// ledger stands for the database the workers write to: a table of balances per invoice in a
// SQLite file, fenced per invoice by fencesql, which refuses a write whose token is lower than
// the highest it has seen for that invoice.
type ledger struct {
	db    *sql.DB
	fence *fencesql.Fence
	dir   string // a temporary directory to remove, or ""
}

// openLedger opens (creating it if needed) the ledger at path, or at a new temporary file when
// path is empty. Simba's migrations bring the fence table (0002_fence).
func openLedger(ctx context.Context, path string) (*ledger, error) {
	l := &ledger{}
	if path == "" {
		dir, err := os.MkdirTemp("", "simba-workers-")
		if err != nil {
			return nil, err
		}
		l.dir, path = dir, filepath.Join(dir, "ledger.db")
	}
	b, err := simbasql.Open(ctx, "sqlite://"+path, simbasql.WithAutoMigrate())
	if err == nil {
		err = b.Migrate(ctx)
		b.Close()
	}
	if err != nil {
		l.close()
		return nil, err
	}
	if l.db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)"); err != nil {
		l.close()
		return nil, err
	}
	if _, err := l.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS ledger (invoice TEXT PRIMARY KEY, balance INTEGER NOT NULL)"); err != nil {
		l.close()
		return nil, err
	}
	l.fence, err = fencesql.New(l.db, "sqlite")
	return l, err
}

func (l *ledger) close() {
	if l.db != nil {
		l.db.Close()
	}
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

func (l *ledger) balance(ctx context.Context, invoice string) (int, error) {
	var b int
	err := l.db.QueryRowContext(ctx, "SELECT balance FROM ledger WHERE invoice = ?", invoice).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return b, err
}

// write sets the invoice's balance if token is at least the highest token the ledger has seen
// for the invoice; otherwise it fails with fence.ErrStaleToken and writes nothing.
func (l *ledger) write(ctx context.Context, invoice string, balance int, token int64) error {
	return l.fence.Write(ctx, invoice, token, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO ledger (invoice, balance) VALUES (?, ?) ON CONFLICT (invoice) DO UPDATE SET balance = excluded.balance", invoice, balance)
		return err
	})
}

func (l *ledger) total(ctx context.Context) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(balance), 0) FROM ledger").Scan(&n)
	return n, err
}
