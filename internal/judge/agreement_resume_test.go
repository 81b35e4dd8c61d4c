package judge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/demo/demotest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
)

// An agreement run that has not finished can be resumed: not while its
// job is queued; at once, its own job put back in the queue, when its
// worker stopped beating; with a new job when the sweep gave its last
// attempt up and paused it. Judgements are cached, so the resumed run
// asks the judge nothing twice. A finished run is not resumed.
func TestAgreementResume(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	seeded, err := demotest.Seeder(pool).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demotest.Seeder(pool).SeedFeedback(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	inserter, err := jobq.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	eps := endpoints.New(pool, nil, &outbound.Client{Policy: policy, Timeout: 2 * time.Second})
	eps.Attempts, eps.RetryDelay = 2, time.Millisecond
	srv := chattest.New(func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.6, "safety_flag": false, "critique": "ok"}`, PromptTokens: 100, CompletionTokens: 10}
	})
	t.Cleanup(srv.Close)
	if _, err := eps.Create(ctx, audit.System, seeded.OrgID, endpoints.NewEndpoint{Name: "deepseek", BaseURL: srv.URL + "/v1", Model: "deepseek-chat"}); err != nil {
		t.Fatal(err)
	}
	svc := judge.New(pool, eps, inserter, pricing.Dollars(5))
	a, err := svc.StartAgreement(ctx, audit.System, seeded.OrgID, judge.AgreementRequest{Endpoint: "deepseek", Items: 12})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (status string, jobID int64, jobs int, stalled bool) {
		t.Helper()
		got, err := svc.GetAgreement(ctx, seeded.OrgID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stalled, err = svc.AgreementStalled(ctx, got.JudgeAgreement); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'agreement_run'`).Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		return string(got.Status), got.RiverJobID.Int64, jobs, stalled
	}
	_, first, _, stalled := read()
	var conflict *errs.Conflict
	if err := svc.ResumeAgreement(ctx, audit.System, seeded.OrgID, a.ID); !errors.As(err, &conflict) || stalled {
		t.Errorf("resuming a queued run: %v (stalled %v)", err, stalled)
	}
	// Its worker was killed two minutes ago, mid-run.
	exec(`UPDATE judge_agreements SET status = 'running' WHERE id = $1`, a.ID)
	exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '2 minutes' WHERE id = $1`, first)
	if _, _, _, stalled := read(); !stalled {
		t.Error("a run whose worker stopped beating is not stalled")
	}
	if err := svc.ResumeAgreement(ctx, audit.System, seeded.OrgID, a.ID); err != nil {
		t.Fatal(err)
	}
	if status, jobID, jobs, stalled := read(); status != "queued" || jobID != first || jobs != 1 || stalled {
		t.Errorf("resumed: %s under job %d of %d (stalled %v), want queued under job %d alone", status, jobID, jobs, stalled, first)
	}
	// Every item judged, then (as if killed before the end was recorded)
	// given up on its last attempt: paused.
	if err := svc.AdvanceAgreement(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	exec(`UPDATE judge_agreements SET status = 'running', finished_at = NULL WHERE id = $1`, a.ID)
	if err := svc.AbandonAgreement(ctx, a.ID, "Its worker stopped on the job's last attempt."); err != nil {
		t.Fatal(err)
	}
	if status, _, _, stalled := read(); status != "paused" || !stalled {
		t.Errorf("abandoned: %s (stalled %v)", status, stalled)
	}
	if err := svc.ResumeAgreement(ctx, audit.System, seeded.OrgID, a.ID); err != nil {
		t.Fatal(err)
	}
	status, second, jobs, _ := read()
	if status != "queued" || second == first || jobs != 2 {
		t.Errorf("resumed after a pause: %s under job %d, %d jobs", status, second, jobs)
	}
	if err := svc.AdvanceAgreement(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if srv.Calls() != calls {
		t.Errorf("the resumed run asked the judge %d more times", srv.Calls()-calls)
	}
	if err := svc.ResumeAgreement(ctx, audit.System, seeded.OrgID, a.ID); !errors.As(err, &conflict) || !strings.Contains(conflict.Message, "finished") {
		t.Errorf("resuming a finished run: %v", err)
	}
	if err := svc.ResumeAgreement(ctx, audit.System, uuid.New(), a.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation resumes the run: %v", err)
	}
}
