// Command workers processes a queue of jobs, each about one invoice, on a pool of goroutines,
// and takes a lock per invoice (invoice-0, invoice-1, …) around each job: no two workers, of
// this process or of any other on the same database, work on one invoice at once. Locks are
// calls, not objects: the client keeps nothing of an invoice's lock once it is unlocked, so
// the number of invoices costs nothing.
//
// Each job reads the invoice's balance from a ledger and writes it back increased, two steps
// that would lose updates without the lock; the ledger (an in-memory stand-in for your
// database) also refuses a write whose fencing token is lower than one it has seen for that
// invoice, which is what keeps a worker that lost its lock (a paused process, a partition)
// from writing.
//
// Goroutines of one process that want the same invoice take turns in the order they asked.
// Across processes, a waiter is woken as soon as the lock is released on PostgreSQL, Redis and
// ZooKeeper; on SQLite and MySQL it retries when the holder's lease would expire (within the
// TTL), so share busy locks across processes through one of the first three.
//
//	go run ./examples/workers -workers 8 -invoices 5 -jobs 40
//	go run ./examples/workers -dsn 'mysql://root@127.0.0.1:3306/test'
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/examples/internal/cli"
)

func main() { cli.Main("workers", run) }

// run processes -jobs jobs, or as many as it can before ctx ends or -for has passed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := cli.NewFlags("workers", cli.SQLiteDSN, cli.SQLUsage, 30*time.Second)
	prefix := flags.String("prefix", "invoice", "the locks are named <prefix>-<invoice number>")
	workers := flags.Int("workers", 8, "how many goroutines process jobs")
	invoices := flags.Int("invoices", 5, "how many invoices the jobs are about")
	jobs := flags.Int("jobs", 40, "how many jobs to process")
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

	books := newLedger()
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
					balance := books.balance(invoice)
					if err := books.write(invoice, balance+1, t.Token()); err != nil {
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

	fmt.Fprintf(stdout, "%d of %d jobs done by %d workers; the ledger counts %d\n", done, *jobs, *workers, books.total())
	if ctx.Err() != nil { // -for passed or interrupted: not an error
		return nil
	}
	return errors.Join(errs...)
}

// ledger stands for the database the workers write to. It keeps, per invoice, a balance and
// the highest fencing token a write carried, and refuses writes with a lower token.
type ledger struct {
	mu       sync.Mutex
	balances map[string]int
	tokens   map[string]int64
}

func newLedger() *ledger {
	return &ledger{balances: map[string]int{}, tokens: map[string]int64{}}
}

func (l *ledger) balance(invoice string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balances[invoice]
}

func (l *ledger) write(invoice string, balance int, token int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.tokens[invoice] {
		return fmt.Errorf("%s: write with token %d refused: the ledger has seen token %d", invoice, token, l.tokens[invoice])
	}
	l.tokens[invoice] = token
	l.balances[invoice] = balance
	return nil
}

func (l *ledger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.balances {
		n += b
	}
	return n
}
