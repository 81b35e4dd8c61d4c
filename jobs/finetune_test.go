package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/internal/provider/openaitest"
	"github.com/curate/curate/jobs"
)

// A real River client works a fine-tuning job to the end: the worker
// snoozes between polls instead of sleeping, and the provider holds one
// job and two files.
func TestFineTuneWorkerSnoozesToTheEnd(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	fake := openaitest.New(t)
	var org uuid.UUID
	if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&org); err != nil {
		t.Fatal(err)
	}
	src := &finetunetest.Source{}
	v := src.AddPref(org, "p v1", finetunetest.Pairs(6), 2)
	dir := t.TempDir()
	svc := &finetune.Service{Pool: pool, Dir: dir,
		DefaultBudget: pricing.Dollars(10), PollEvery: 10 * time.Millisecond,
		Providers: finetune.Providers{"openai": finetune.OpenAI(openai.Config{APIKey: "sk-test", BaseURL: fake.URL()})}}
	svc.SetDataSource(src)

	client, err := jobs.NewClient(pool, &app.Services{Heartbeats: jobq.NewHeartbeats(pool), Accounts: accounts.New(pool, accounts.DefaultSessionTTL), Log: slog.New(slog.DiscardHandler), FineTune: svc}, jobs.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobSnoozed)
	defer cancel()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx) //nolint:errcheck

	svc.Jobs = client
	job, _, err := svc.Launch(ctx, audit.System, org, finetune.Request{VersionID: v.ID, Provider: "openai",
		BaseModel: "gpt-4o-mini-2024-07-18", Method: provider.DPO})
	if err != nil {
		t.Fatal(err)
	}
	snoozes := 0
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-events:
			if ev.Job.Kind != (finetune.JobArgs{}).Kind() {
				continue
			}
			switch ev.Kind {
			case river.EventKindJobSnoozed:
				snoozes++
			case river.EventKindJobCompleted:
				done = true
			default:
				t.Fatalf("event %s: %v", ev.Kind, ev.Job.Errors)
			}
		case <-timeout:
			t.Fatal("the job did not end")
		}
	}
	j, err := db.New(pool).FineTuneJobGetByID(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != db.FinetuneStatusSucceeded || fake.JobsCreated() != 1 || fake.FilesCreated() != 2 {
		t.Fatalf("job %s; %d provider jobs, %d files", j.Status, fake.JobsCreated(), fake.FilesCreated())
	}
	// The default script needs at least one wait for the files and one
	// for each of validating, queued and the four training steps.
	if snoozes < 6 {
		t.Errorf("%d snoozes, want the worker to wait between polls", snoozes)
	}
}
