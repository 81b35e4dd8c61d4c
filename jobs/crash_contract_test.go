package jobs_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/app"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/jobs"
)

// How each job kind meets the crash contract: a kind either beats (the
// heartbeat sweep puts it back in the queue 25 to 45 s after its worker's
// last beat) and names the test that kills its process mid-work, or it is
// short (its timeout at most jobs.ShortJobLimit, so River's rescue takes
// it back within 90 s of its worker's death) and says why running it
// again does no harm.
type crashRow struct {
	beats bool
	// why: the crash test of a kind that beats, or why retrying a short
	// kind is harmless.
	why string
}

var crashContract = map[string]crashRow{
	"dataset_export":         {beats: true, why: "TestExportSurvivesKill (cmd/curate): the retry writes the same bytes"},
	"evaluation_run":         {beats: true, why: "TestEvaluationSurvivesKill (cmd/curate): the retry goes on at the next unscored item"},
	"loop_run_advance":       {beats: true, why: "TestLoopSurvivesKillDuringEvaluate and TestLoopSurvivesChaos (cmd/curate): each step's result is recorded before the next"},
	"model_deploy":           {beats: true, why: "TestDeploymentSurvivesKill (cmd/curate): killed after the adapter load, resumed with no second load"},
	"finetune_advance":       {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): killed as the provider creates its job; the retry adopts that job, one created"},
	"import_run":             {beats: true, why: "TestHeartbeatSweep (jobs) takes it back and fails its last attempt's run; rows are keyed by external id, a retry stores no duplicate"},
	"agreement_run":          {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): each judgement is cached as it comes, the retry asks the judge only what it had not answered"},
	"dataset_report":         {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): killed mid-report, the retry computes it whole and stores one"},
	"langfuse_sync":          {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): killed mid-read; one transaction stores the scores with the new position, each stored once"},
	"codebook_suggest":       {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): each answer is stored as it comes, the retry asks only for pending suggestions"},
	"live_score":             {beats: true, why: "TestEachKindSurvivesKill (cmd/curate): each answer is claimed and scored before the next; the retry takes over its dead attempt's claim"},
	"maintenance_run":        {why: "deletes rows past their time; deleting them again deletes nothing"},
	"heartbeat_sweep":        {why: "one conditional UPDATE per stale job; a second sweep finds nothing to take"},
	"alert_evaluate":         {why: "one open alert per condition's key: a second evaluation updates it"},
	"alert_deliver":          {why: "the delivery keeps one message id, so the receiver drops a repeat"},
	"langfuse_sync_all":      {why: "queues one sync per connection, unique while one waits"},
	"rollout_check":          {why: "each step is a conditional update of the experiment's phase"},
	"experiment_sums_run":    {why: "takes the changed end users in the transaction that folds them in; a killed fold rolls back and leaves them to the next"},
	"live_score_sample":      {why: "samples answers by a unique key; sampling again adds none"},
	"loop_trigger_check":     {why: "a run starts under a unique key per loop and trigger"},
	"routing_rule_run":       {why: "hands out only items not yet handed out"},
	"feedback_hygiene_check": {why: "marks items by conditional updates; marking again changes nothing"},
	"model_unload":           {why: "records the unload before asking; an adapter the server does not know is already gone"},
	"serving_check":          {why: "asks each target once and records the answer; a reload it starts is a deployment with its own job"},
	"shadow_run":             {beats: true, why: "TestShadowRunNeverAsksTwice (internal/shadow): each step is recorded before the next, and a query begun by a stopped worker is failed, never asked again"},
	"shadow_sample":          {why: "samples queries by a unique key; sampling again adds none"},
}

// Every registered job kind has a row, and each row holds: a kind that
// beats is swept, and a kind that does not has a timeout River's rescue
// honours within 90 s. A new kind without a row fails here.
func TestEveryJobKindHasACrashContract(t *testing.T) {
	pool := pgtest.NewDB(t)
	cfg := config.Defaults()
	cfg.DataDir, cfg.SessionKey, cfg.SecretKey = t.TempDir(), "contract-session-key-0123456789abcdef01", "contract-secret-key-0123456789abcdef012"
	svc, err := app.New(cfg, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Scratch.Close() //nolint:errcheck
	var beating []string
	for _, k := range jobs.LongKinds(svc) {
		beating = append(beating, k.Kinds...)
	}
	registered := jobs.Kinds(svc)
	if len(registered) < len(crashContract) {
		t.Errorf("only %d kinds registered with every service present, %d rows", len(registered), len(crashContract))
	}
	seen := map[string]bool{}
	for _, k := range registered {
		seen[k.Kind] = true
		row, ok := crashContract[k.Kind]
		switch {
		case !ok:
			t.Errorf("job kind %s has no row in crashContract: make it beat (LongKinds) with a crash test, or keep its timeout within %s and say why a retry is harmless",
				k.Kind, jobs.ShortJobLimit)
		case row.why == "":
			t.Errorf("job kind %s: its row says nothing", k.Kind)
		case row.beats && !slices.Contains(beating, k.Kind):
			t.Errorf("job kind %s is listed as beating but is not among LongKinds", k.Kind)
		case !row.beats && slices.Contains(beating, k.Kind):
			t.Errorf("job kind %s beats but its row calls it short", k.Kind)
		case !row.beats && k.Timeout > jobs.ShortJobLimit:
			t.Errorf("job kind %s does not beat and its timeout is %s: River's rescue would leave its dead worker's job running past 90 s", k.Kind, k.Timeout)
		}
	}
	for kind := range crashContract {
		if !seen[kind] {
			t.Errorf("crashContract has a row for %s, which no worker registers", kind)
		}
	}
}
