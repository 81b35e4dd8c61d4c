package jobs_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/alerts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/jobs"
)

// kindName is how a job kind reads: the noun it works on, then what it
// does to it (one verb of a fixed set), then any qualifier, as query names
// read: dataset_export, model_deploy, langfuse_sync_all.
var kindName = regexp.MustCompile(`^[a-z]+(_[a-z]+)*?_(advance|check|deliver|deploy|evaluate|export|report|run|sample|score|suggest|sweep|sync|unload)(_[a-z]+)?$`)

// Every job kind declared in the code reads noun, verb, qualifier.
func TestJobKindsNamedOneWay(t *testing.T) {
	decl := regexp.MustCompile(`func \(\w+\) Kind\(\) string \{ return "(\w+)" \}`)
	var kinds []string
	for _, dir := range []string{".", "../internal"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllSubmatch(src, -1) {
				kinds = append(kinds, string(m[1]))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(kinds) < 16 {
		t.Fatalf("found only %d job kinds: %v", len(kinds), kinds)
	}
	for _, k := range kinds {
		if !kindName.MatchString(k) {
			t.Errorf("job kind %q is not noun_verb[_qualifier] with a verb of the set", k)
		}
	}
}

// A renamed kind keeps its earlier name as an alias, so that jobs queued
// before the rename are still worked.
func TestRenamedKindsKeepTheirOldNames(t *testing.T) {
	for old, args := range map[string]river.JobArgs{
		"finetune":            finetune.JobArgs{},
		"evaluation":          eval.EvaluateArgs{},
		"experiment_rollouts": experiments.RolloutArgs{},
		"alerts_evaluate":     jobs.AlertsEvaluateArgs{},
		"alert_webhook":       alerts.WebhookArgs{},
		"judge_agreement":     judge.AgreementArgs{},
		"import_file":         imports.ImportArgs{},
		"maintenance":         jobs.MaintenanceArgs{},
	} {
		aliased, ok := args.(river.JobArgsWithKindAliases)
		if !ok || !slices.Contains(aliased.KindAliases(), old) || args.Kind() == old {
			t.Errorf("%T: kind %q does not keep %q as an alias", args, args.Kind(), old)
		}
	}
}

// A job queued under a kind's earlier name, as a process before the rename
// left it, is worked by the workers Register adds.
func TestJobUnderOldKindIsWorked(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, max_attempts) VALUES ('maintenance', '{}', 1) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	svc := &app.Services{Heartbeats: jobq.NewHeartbeats(pool), Accounts: accounts.New(pool, accounts.DefaultSessionTTL), Log: slog.New(slog.DiscardHandler)}
	client, err := jobs.NewClient(pool, svc, jobs.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck
	for {
		select {
		case ev := <-events:
			if ev.Job.ID != id {
				continue // the periodic jobs run on start too
			}
			if ev.Kind != river.EventKindJobCompleted {
				t.Fatalf("the job under the old kind: %s, %v", ev.Kind, ev.Job.Errors)
			}
			return
		case <-time.After(30 * time.Second):
			t.Fatal("the job under the old kind was not worked")
		}
	}
}
