package finetune_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/openaitest"
)

// machine is another worker on the same database: its own scratch
// directory and its own provider client.
func (e *env) machine(t *testing.T, entry finetune.Entry) *finetune.Service {
	t.Helper()
	svc := &finetune.Service{Pool: e.pool, Providers: finetune.Providers{"openai": entry}, Dir: filepath.Join(t.TempDir(), "ft"),
		DefaultBudget: pricing.Dollars(100), PollEvery: time.Millisecond, Jobs: e.svc.Jobs}
	svc.SetDataSource(e.src)
	return svc
}

func advance(t *testing.T, svc *finetune.Service, job db.FineTuningJob, want finetune.Step) error {
	t.Helper()
	out, err := svc.Advance(context.Background(), job.ID)
	if out.Step != want {
		t.Fatalf("step %s (%v), want %s", out.Step, err, want)
	}
	return err
}

// empty fails unless dir holds nothing (or does not exist).
func empty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left behind in %s", e.Name(), dir)
	}
}

// A job prepared on one machine is uploaded by a second, whose worker dies
// right after OpenAI took the files, and finished (upload again, create,
// poll) by a third. No step reads another machine's disk: the first
// machine's data directory is gone by the time the second starts. OpenAI
// ends up with exactly the two files and one job, and no machine keeps a
// scratch file.
func TestJobMovesBetweenMachines(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "support-dpo v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO})

	if err := advance(t, e.svc, job, finetune.StepPrepare); err != nil {
		t.Fatal(err)
	}
	empty(t, e.svc.Dir)
	if err := os.RemoveAll(e.svc.Dir); err != nil {
		t.Fatal(err)
	}

	b := e.machine(t, killing(openaiEntry(srv), "Upload"))
	if err := advance(t, b, job, finetune.StepUpload); err == nil {
		t.Fatal("the second machine's worker did not die")
	}
	empty(t, b.Dir)
	if n := srv.FilesCreated(); n != 2 {
		t.Fatalf("OpenAI holds %d files after the first upload, want 2", n)
	}

	c := e.machine(t, openaiEntry(srv))
	steps := []finetune.Step{}
	for range 100 {
		out, err := c.Advance(context.Background(), job.ID)
		if err != nil {
			t.Fatalf("step %s: %v", out.Step, err)
		}
		steps = append(steps, out.Step)
		if out.Done {
			break
		}
	}
	if steps[0] != finetune.StepUpload {
		t.Errorf("the third machine began with %s, want upload: %v", steps[0], steps)
	}
	j := e.job(t, job.ID).Job
	if j.Status != db.FinetuneStatusSucceeded || j.FineTunedModel == "" {
		t.Fatalf("job ended %s: %s", j.Status, j.ErrorMessage)
	}
	if srv.FilesCreated() != 2 || srv.JobsCreated() != 1 {
		t.Errorf("OpenAI holds %d files and %d jobs, want 2 and 1", srv.FilesCreated(), srv.JobsCreated())
	}
	if len(j.TrainSha256) != 64 || len(j.ValidSha256) != 64 {
		t.Errorf("digests %q and %q", j.TrainSha256, j.ValidSha256)
	}
	empty(t, c.Dir)
}

// Files that come out different when the upload writes them again than
// when the job was prepared are not sent: the job fails saying so, and
// OpenAI holds nothing.
func TestChangedFilesAreNotUploaded(t *testing.T) {
	srv := openaitest.New(t)
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(srv)})
	v := e.src.AddPref(e.org, "support-dpo v1", finetunetest.Pairs(6), 2)
	job := e.launch(t, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO})
	if err := advance(t, e.svc, job, finetune.StepPrepare); err != nil {
		t.Fatal(err)
	}
	changed := finetunetest.Pairs(6)
	changed[0].Chosen = "6"
	e.src.ReplacePref(v.ID, changed)
	e.run(t, job.ID)
	j := e.job(t, job.ID).Job
	if j.Status != db.FinetuneStatusFailed || !strings.Contains(j.ErrorMessage, "came out different") {
		t.Errorf("job %s: %q", j.Status, j.ErrorMessage)
	}
	if srv.FilesCreated() != 0 || j.ActualCost.Int64 != 0 {
		t.Errorf("OpenAI holds %d files; the job cost %d", srv.FilesCreated(), j.ActualCost.Int64)
	}
	empty(t, e.svc.Dir)
}

// A scratch folder that a process killed mid-step left behind (older than
// any step runs) is removed the first time the service needs scratch
// space; a recent one, perhaps another process's step under way, stays.
func TestLeftScratchIsRemoved(t *testing.T) {
	e := newEnv(t, finetune.Providers{"openai": openaiEntry(openaitest.New(t))})
	v := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(6), 2)
	old, recent := filepath.Join(e.svc.Dir, "job-dead-1"), filepath.Join(e.svc.Dir, "job-live-2")
	for _, dir := range []string{old, recent} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "train.jsonl"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Estimate(context.Background(), e.org, finetune.Request{VersionID: v.ID, Provider: "openai", BaseModel: mini, Method: provider.DPO}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the dead step's folder is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(recent, "train.jsonl")); err != nil {
		t.Errorf("a recent folder was removed: %v", err)
	}
}
