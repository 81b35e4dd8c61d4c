package models_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
	"github.com/curate/curate/internal/serving/vllmtest"
)

// rmPath is where the REWARD stage left its merged model; the pooling
// server was started from it and serves it as "support-rm".
const rmPath = "/runs/7f3a/final"

func constant(x float64) func([]vllmtest.Message) float64 {
	return func([]vllmtest.Message) float64 { return x }
}

// A reward model is a kind of version: registered by hand without a base
// model, or registered by the local trainer's REWARD stage.
func TestRegisterRewardModel(t *testing.T) {
	ctx, pool, svc, org, _ := setup(t)
	v, err := svc.Register(ctx, admin, org, models.NewVersion{Name: "support-rm", ModelID: "Skywork/Skywork-Reward-V2-Qwen3-0.6B", Kind: models.KindReward})
	if err != nil || v.Kind != models.KindReward || v.BaseModel != "" {
		t.Fatalf("a reward model by hand: %+v, %v", v, err)
	}
	var jobID uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO fine_tuning_jobs (org_id, dataset_version_id, dataset_label, dataset_kind, provider,
		base_model, method, export_format, train_examples, estimated_tokens, estimated_epochs, price_per_million, price_date, estimated_cost)
		VALUES ($1, gen_random_uuid(), 'Support pairs', 'preference', 'local', 'Qwen/Qwen2.5-0.5B-Instruct', 'reward', 'trl_preference', 10, 1000, 3, 0, '2026-11-01', 0)
		RETURNING id`, org).Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	job, err := q.FineTuneJobGet(ctx, db.FineTuneJobGetParams{OrgID: org, ID: jobID})
	if err != nil {
		t.Fatal(err)
	}
	var trained db.ModelVersion
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		trained, err = svc.RegisterJobTx(ctx, tx, job, rmPath, 0, 0)
		return err
	})
	if err != nil || trained.Kind != models.KindReward || trained.ModelID != rmPath {
		t.Fatalf("the REWARD stage's model: %+v, %v", trained, err)
	}
	if _, err := svc.Register(ctx, admin, org, models.NewVersion{Name: "support-rm", ModelID: "m", Kind: "critic"}); !strings.Contains(fields(err)["kind"], "reward") {
		t.Errorf("an unknown kind: %v", err)
	}
}

// A reward model deploys only to a vLLM pooling target, which must list it
// (by its served name or the path it was started from); nothing is loaded,
// and the alias moves once the target lists it. Where it scores is read
// from the deployment that serves it, and stops when the target no longer
// lists it.
func TestDeployRewardModel(t *testing.T) {
	e := newDeployEnv(t)
	pooling := vllmtest.NewPooling(t, "support-rm", rmPath, constant(0.5))
	gen := vllmtest.New(t, base)
	e.target(t, serving.NewTarget{Name: "rm-1", Kind: serving.KindVLLMPooling, BaseURL: pooling.URL})
	e.target(t, serving.NewTarget{Name: "gpu-1", Kind: serving.KindVLLM, BaseURL: gen.URL})
	rm, err := e.svc.Register(e.ctx, admin, e.org, models.NewVersion{Name: "support-rm", ModelID: rmPath, Kind: models.KindReward})
	if err != nil {
		t.Fatal(err)
	}
	lora := e.register(t, "1.0.0", models.KindLoRA, "/adapters/support-1")

	// Wrong targets are refused before anything is stored.
	_, err = e.svc.Deploy(e.ctx, admin, e.org, rm.ID, models.DeployRequest{Alias: "production", Target: "gpu-1", Reason: "x"})
	if f := fields(err); !strings.Contains(f["target"], "is a reward model") || !strings.Contains(f["target"], "pooling runner") {
		t.Errorf("a reward model on a LoRA server: %v", err)
	}
	_, err = e.svc.Deploy(e.ctx, admin, e.org, lora.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "x"})
	if f := fields(err); !strings.Contains(f["target"], "pooling runner") || !strings.Contains(f["target"], "LoRA adapter") {
		t.Errorf("an adapter on a pooling server: %v", err)
	}
	targets, err := e.svc.TargetsFor(e.ctx, e.org, rm.ID)
	if err != nil || len(targets) != 1 || targets[0].Name != "rm-1" {
		t.Errorf("targets offered for a reward model: %+v, %v", targets, err)
	}

	d, err := e.svc.Deploy(e.ctx, admin, e.org, rm.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "the first reward model"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	got := e.deployment(t, d.ID)
	if got.Status != "succeeded" || got.ServedName != "support-rm" {
		t.Fatalf("deployment %+v", got)
	}
	res, err := e.svc.Resolve(e.ctx, e.org, "support-rm", "production")
	if err != nil || res.Model != "support-rm" || res.Target != "rm-1" || res.BaseURL != pooling.URL {
		t.Errorf("production resolves to %+v, %v", res, err)
	}
	if id, err := e.svc.AliasVersion(e.ctx, e.org, "support-rm", "production"); err != nil || id != rm.ID {
		t.Errorf("the alias names %s, %v", id, err)
	}
	if _, err := e.svc.AliasVersion(e.ctx, e.org, "support-rm", "staging"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("an alias never set: %v", err)
	}
	m, err := e.svc.Scoring(e.ctx, e.org, rm.ID)
	if err != nil || m.Model != "support-rm" || m.Target != "rm-1" || m.Address != pooling.URL || m.Name != "support-rm" || m.Version != "1.0.0" {
		t.Fatalf("scoring at %+v, %v", m, err)
	}

	// Refusals: another kind, another organisation, not served.
	var notReward *models.NotReward
	if _, err := e.svc.Scoring(e.ctx, e.org, lora.ID); !errors.As(err, &notReward) || !strings.Contains(err.Error(), "LoRA adapter") {
		t.Errorf("an adapter asked to score: %v", err)
	}
	if _, err := e.svc.Scoring(e.ctx, uuid.New(), rm.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another organisation's reward model: %v", err)
	}
	other, err := e.svc.Register(e.ctx, admin, e.org, models.NewVersion{Name: "support-rm", ModelID: "/runs/8b1c/final", Kind: models.KindReward})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Scoring(e.ctx, e.org, other.ID); !errors.Is(err, models.ErrNotScoring) {
		t.Errorf("a reward model never deployed: %v", err)
	}
	// The target does not list it: the deployment is refused for good,
	// and the alias stays.
	d2, err := e.svc.Deploy(e.ctx, admin, e.org, other.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "the retrained one"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.svc.Advance(e.ctx, d2.ID)
	if err == nil || !models.Permanent(err) {
		t.Fatalf("a model the target does not serve: %v", err)
	}
	if err := e.svc.Fail(e.ctx, d2.ID, err); err != nil {
		t.Fatal(err)
	}
	if f := e.deployment(t, d2.ID); f.Status != "failed" || !strings.Contains(f.Error, "The target rm-1 does not serve /runs/8b1c/final") || !strings.Contains(f.Error, "--runner pooling") {
		t.Errorf("refused deployment %+v", f)
	}
	if id, _ := e.svc.AliasVersion(e.ctx, e.org, "support-rm", "production"); id != rm.ID {
		t.Errorf("a refused deployment moved the alias to %s", id)
	}

	// The server is restarted with the retrained model: the first is no
	// longer listed, which asking the target finds and records.
	pooling.Restart("support-rm-2", "/runs/8b1c/final")
	if _, ok, err := e.svc.Confirm(e.ctx, e.org, rm.ID, uuid.Nil); ok || err != nil {
		t.Errorf("confirmed a reward model the target no longer serves: %v %v", ok, err)
	}
	if _, err := e.svc.Scoring(e.ctx, e.org, rm.ID); !errors.Is(err, models.ErrNotScoring) {
		t.Errorf("scoring after the restart: %v", err)
	}
	d3, err := e.svc.Deploy(e.ctx, admin, e.org, other.ID, models.DeployRequest{Alias: "production", Target: "rm-1", Reason: "the retrained one, now served"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Advance(e.ctx, d3.ID); err != nil {
		t.Fatal(err)
	}
	if m, err := e.svc.Scoring(e.ctx, e.org, other.ID); err != nil || m.Model != "support-rm-2" {
		t.Errorf("the retrained model scores at %+v, %v", m, err)
	}
}
