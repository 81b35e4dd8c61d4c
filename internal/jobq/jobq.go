// Package jobq is how a domain service starts background work: it inserts
// River jobs inside its own transaction, so the job exists exactly when the
// rows it works on do. Job args live in the domain package that starts the
// job; the workers that run them live in the jobs package.
package jobq

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// Inserter inserts jobs in a caller's transaction and wakes waiting ones.
// River's client is one.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobRetry(ctx context.Context, id int64) (*rivertype.JobRow, error)
}

// Kinds lists the kinds of args with the earlier names they keep as
// aliases (river.JobArgsWithKindAliases): a query over River's rows of
// a kind must find the jobs queued under its old name too.
func Kinds(args ...river.JobArgs) []string {
	var out []string
	for _, a := range args {
		out = append(out, a.Kind())
		if aliased, ok := a.(river.JobArgsWithKindAliases); ok {
			out = append(out, aliased.KindAliases()...)
		}
	}
	return out
}

// New builds an insert-only River client: it runs no job, so every process
// (web, worker, CLI) can start jobs that any worker then takes.
func New(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{})
}

// OnePerArgs keeps one job per kind and args while one waits or runs, so
// that a second insert (a periodic sampler's) adds nothing: no item is
// worked on by two of them at once.
func OnePerArgs() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
		rivertype.JobStateRetryable}}}
}
