// Package experiments runs A/B experiments between model versions: arms
// with weights over a registered model's versions, deterministic and sticky
// assignment of units, their first exposures, feedback attributed to arms,
// results with the statistics engine's tests and a recommendation, and a
// gradual rollout that steps the treatment's share up while its guardrails
// hold and rolls back when they break.
package experiments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/models"
)

// Service does the work; its fields are its dependencies.
type Service struct {
	Pool   *pgxpool.Pool
	Models *models.Service
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// configs are the experiments' configurations assignment has read.
	configs configs
}

// New builds the experiments' service on the registry whose versions they
// compare.
func New(pool *pgxpool.Pool, models *models.Service) *Service {
	return &Service{Pool: pool, Models: models}
}

// Statuses.
const (
	Draft     = "draft"
	Running   = "running"
	Paused    = "paused"
	Completed = "completed"
	Cancelled = "cancelled"
)

// Metrics an experiment can read from feedback; the first listed is the
// primary one.
const (
	ThumbsUpRate   = "thumbs_up_rate"
	AvgRating      = "avg_rating"
	CorrectionRate = "correction_rate"
	Latency        = "latency"
	// Each rating dimension's average.
	AvgAccuracy    = "avg_accuracy"
	AvgHelpfulness = "avg_helpfulness"
	AvgClarity     = "avg_clarity"
	AvgSafety      = "avg_safety"
	// AvgJudgeScore is the live scorer's average score of each unit's
	// sampled answers (see internal/livescore).
	AvgJudgeScore = "avg_judge_score"
)

// Metrics lists them; higherIsBetter says which way is good.
var (
	Metrics        = []string{ThumbsUpRate, AvgRating, CorrectionRate, Latency, AvgAccuracy, AvgHelpfulness, AvgClarity, AvgSafety, AvgJudgeScore}
	higherIsBetter = map[string]bool{ThumbsUpRate: true, AvgRating: true, AvgAccuracy: true, AvgHelpfulness: true, AvgClarity: true, AvgSafety: true,
		AvgJudgeScore: true}
)

// MetricAliases are the seed's names for metrics (ab_test_experiments'
// success_metrics: the A/B panel's helpfulness and accuracy, the rating
// dimensions' averages), taken for Curate's own.
var MetricAliases = map[string]string{
	"helpfulness": AvgHelpfulness,
	"accuracy":    AvgAccuracy,
	"clarity":     AvgClarity,
	"safety":      AvgSafety,
	"rating":      AvgRating,
}

// canonicalMetrics returns the list with each alias replaced by the
// metric it names.
func canonicalMetrics(list []string) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, m := range list {
		if own, ok := MetricAliases[m]; ok {
			m = own
		}
		out[i] = m
	}
	return out
}

// Limits on input.
const (
	MaxUnitID = 200
	MaxBatch  = 1000
	MaxName   = 200
	// MaxMetrics bounds an experiment's metrics, and its guardrails.
	MaxMetrics = 10
)

var keyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// NewExperiment is what POST /api/models/ab-test takes. TrafficSplit is
// the treatment's share. Key "" derives one from the name. StartsAt and
// EndsAt are the planned window; an admin still starts and ends the
// experiment.
type NewExperiment struct {
	Key              string     `json:"key"`
	Name             string     `json:"name"`
	ControlModelID   uuid.UUID  `json:"control_model_id"`
	TreatmentModelID uuid.UUID  `json:"treatment_model_id"`
	TrafficSplit     *float64   `json:"traffic_split"`
	Coverage         *float64   `json:"coverage"`
	Seed             string     `json:"seed"`
	Metrics          []string   `json:"metrics"`
	Guardrails       []string   `json:"guardrails"`
	MinSamplePerArm  *int       `json:"min_sample_per_arm"`
	StartsAt         *time.Time `json:"starts_at"`
	EndsAt           *time.Time `json:"ends_at"`
	Rollout          *Rollout   `json:"rollout"`
	Analysis
}

// Rollout is a gradual rollout plan: the treatment's share at each step,
// how long and how many units per arm each step needs before the next.
type Rollout struct {
	Steps    []float64 `json:"steps"`
	HoldMins int       `json:"hold_minutes"`
	MinUnits int       `json:"min_units_per_arm"`
}

// Experiment is an experiment as the API shows it.
type Experiment struct {
	ID              uuid.UUID  `json:"id"`
	Key             string     `json:"key"`
	Name            string     `json:"name"`
	Status          string     `json:"status"`
	Seed            string     `json:"seed"`
	Coverage        float64    `json:"coverage"`
	TrafficSplit    float64    `json:"traffic_split"`
	Arms            []Arm      `json:"arms"`
	Metrics         []string   `json:"metrics"`
	Guardrails      []string   `json:"guardrails"`
	MinSamplePerArm int        `json:"min_sample_per_arm"`
	Winner          string     `json:"winner"`
	Conflicts       int64      `json:"conflicts"`
	Rollout         *Rollout   `json:"rollout,omitempty"`
	RolloutStep     int        `json:"rollout_step"`
	StopReason      string     `json:"stop_reason,omitempty"`
	StartedAt       *time.Time `json:"started_at"`
	StartsAt        *time.Time `json:"starts_at"` // the planned start
	EndsAt          *time.Time `json:"ends_at"`
	EndedAt         *time.Time `json:"ended_at"`
	CreatedAt       time.Time  `json:"created_at"`
	ModelID         uuid.UUID  `json:"registered_model_id"`
	// Phase counts re-randomisations from 1; results read the current
	// phase's exposures and the feedback since it started.
	Phase          int        `json:"phase"`
	PhaseStartedAt *time.Time `json:"phase_started_at"`
	WeightsChanged bool       `json:"weights_changed"`
	// Analysis is how its results are computed: the engine (""
	// follows the organisation's default), CUPED's pre-exposure days, the
	// corrections and each metric's criterion.
	Analysis Analysis `json:"analysis"`
}

// Arm is one arm.
type Arm struct {
	Index          int       `json:"index"`
	Name           string    `json:"name"`
	ModelVersionID uuid.UUID `json:"model_version_id"`
	Version        string    `json:"version"`
	Weight         float64   `json:"weight"`
	// DeploymentID is the deployment the arm is called at, chosen when
	// the experiment started; none for a provider's model called by its
	// id, or before the start.
	DeploymentID *uuid.UUID `json:"deployment_id"`
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Create records a draft experiment, audited.
func (s *Service) Create(ctx context.Context, actor audit.Actor, orgID uuid.UUID, in NewExperiment) (Experiment, error) {
	v := &errs.Invalid{}
	// Without a key, one is derived from the name (see freeKey).
	derive := in.Key == ""
	unnamed := derive && strings.TrimSpace(in.Name) == ""
	if unnamed {
		v.Add("key", "is required, or send a name to derive it from")
	} else if !derive && v.Text("key", in.Key, 64, true) && !keyPattern.MatchString(in.Key) {
		v.Add("key", "must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	} else if in.Key == "new" {
		v.Add("key", "is taken by the page that creates experiments: choose another")
	}
	if in.Name == "" {
		in.Name = in.Key
	}
	if !unnamed {
		v.Text("name", in.Name, MaxName, true)
	}
	v.Text("seed", in.Seed, 200, false)
	if in.StartsAt != nil && in.EndsAt != nil && !in.EndsAt.After(*in.StartsAt) {
		v.Add("ends_at", "must be after starts_at")
	}
	split, coverage := 0.5, 1.0
	if in.TrafficSplit != nil {
		split = *in.TrafficSplit
	}
	if !(split > 0 && split < 1) {
		v.Add("traffic_split", "must lie between 0 and 1: the treatment's share")
	}
	if in.Coverage != nil {
		coverage = *in.Coverage
	}
	if !(coverage > 0 && coverage <= 1) {
		v.Add("coverage", "must be above 0 and at most 1")
	}
	in.Metrics, in.Guardrails = canonicalMetrics(in.Metrics), canonicalMetrics(in.Guardrails)
	if len(in.Metrics) == 0 {
		in.Metrics = []string{ThumbsUpRate}
	}
	// Each metric once, in one list or the other: a results page holds one
	// row per metric.
	seen := map[string]string{}
	for _, list := range []struct {
		name    string
		metrics []string
	}{{"metrics", in.Metrics}, {"guardrails", in.Guardrails}} {
		if len(list.metrics) > MaxMetrics {
			v.Add(list.name, "at most %d, not %d", MaxMetrics, len(list.metrics))
			continue
		}
		for i, m := range list.metrics {
			field := fmt.Sprintf("%s[%d]", list.name, i)
			switch {
			case !slices.Contains(Metrics, m):
				v.Add(field, "must be one of %s", strings.Join(Metrics, ", "))
			case seen[m] != "":
				v.Add(field, "%s is already listed as %s", m, seen[m])
			default:
				seen[m] = field
			}
		}
	}
	minSample := 100
	if in.MinSamplePerArm != nil {
		minSample = *in.MinSamplePerArm
	}
	if minSample < 2 || minSample > 10_000_000 {
		v.Add("min_sample_per_arm", "must be 2 to 10,000,000")
	}
	if in.EndsAt != nil && !in.EndsAt.After(s.now()) {
		v.Add("ends_at", "must be in the future")
	}
	steps, hold, minUnits := []float64{}, time.Hour*24, 100
	if r := in.Rollout; r != nil {
		steps = r.Steps
		if len(steps) == 0 || len(steps) > 10 {
			v.Add("rollout.steps", "give 1 to 10 treatment shares, rising, the last 1 (such as [0.1, 0.5, 1])")
		}
		for i, st := range steps {
			if !(st > 0 && st <= 1) || i > 0 && st <= steps[i-1] {
				v.Add(fmt.Sprintf("rollout.steps[%d]", i), "must be above the step before and at most 1")
			}
		}
		if len(steps) > 0 && steps[len(steps)-1] != 1 {
			v.Add("rollout.steps", "must end at 1: the full rollout")
		}
		if r.HoldMins < 0 || r.HoldMins > 60*24*90 {
			v.Add("rollout.hold_minutes", "must be 0 to 129600")
		}
		hold = time.Duration(r.HoldMins) * time.Minute
		if r.MinUnits != 0 {
			minUnits = r.MinUnits
		}
		if len(steps) > 0 && v.Err() == nil {
			split = steps[0]
		}
	}
	analysis := in.Analysis.validate(v, in.Metrics, in.Guardrails)
	if in.ControlModelID == uuid.Nil {
		v.Add("control_model_id", "is required: a model version")
	}
	if in.TreatmentModelID == uuid.Nil || in.TreatmentModelID == in.ControlModelID {
		v.Add("treatment_model_id", "is required: another version of the same model")
	}
	if err := v.Err(); err != nil {
		return Experiment{}, err
	}
	var out db.Experiment
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if derive {
			key, err := freeKey(ctx, q, orgID, in.Name)
			if err != nil {
				return err
			}
			in.Key = key
		}
		if in.Seed == "" {
			in.Seed = in.Key
		}
		arms := []struct {
			name string
			id   uuid.UUID
			w    float64
		}{{"control", in.ControlModelID, 1 - split}, {"treatment", in.TreatmentModelID, split}}
		var model uuid.UUID
		for _, a := range arms {
			field := a.name + "_model_id"
			mv, err := q.ModelVersionGet(ctx, db.ModelVersionGetParams{OrgID: orgID, ID: a.id})
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.InvalidField(field, "is not a model version of this organisation")
			}
			if err != nil {
				return err
			}
			if mv.ModelVersion.Status == db.ModelVersionStatusArchived {
				return errs.InvalidField(field, "is archived: it cannot take traffic")
			}
			if model != uuid.Nil && mv.RegisteredModel.ID != model {
				return errs.InvalidField(field, "is a version of another model: both arms split one model's traffic")
			}
			model = mv.RegisteredModel.ID
		}
		var err error
		out, err = q.ExperimentInsert(ctx, db.ExperimentInsertParams{OrgID: orgID, Key: in.Key, Name: in.Name, RegisteredModelID: model,
			Seed: in.Seed, Coverage: coverage, Metrics: in.Metrics, Guardrails: nonNil(in.Guardrails), MinSamplePerArm: int32(minSample),
			RolloutSteps: steps, RolloutHold: pgtype.Interval{Microseconds: hold.Microseconds(), Valid: true}, RolloutMinUnits: int32(minUnits),
			StartsAt: in.StartsAt, EndsAt: in.EndsAt, CreatedByLabel: actor.Label})
		if errs.IsUnique(err, "experiments_org_id_key_key") {
			return errs.InvalidField("key", "an experiment with the key %q exists", in.Key)
		}
		if err != nil {
			return err
		}
		if err := analysis.store(ctx, q, out.ID); err != nil {
			return err
		}
		for i, a := range arms {
			if err := q.ExperimentArmInsert(ctx, db.ExperimentArmInsertParams{ExperimentID: out.ID, Idx: int32(i), Name: a.name,
				ModelVersionID: a.id, Weight: a.w}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiment.create", TargetType: "experiment",
			TargetID: out.ID.String(), Details: map[string]any{"key": in.Key, "traffic_split": split, "coverage": coverage,
				"engine": analysis.engine, "cuped_days": analysis.cupedDays, "criteria": analysis.criteria}})
	})
	if err != nil {
		return Experiment{}, err
	}
	return s.Get(ctx, orgID, in.Key)
}

// freeKey derives a key from an experiment's name ("Support v2 vs v3" →
// "support-v2-vs-v3"), numbered ("-2", "-3", ...) past the organisation's
// keys already taken. The keys are held still until the transaction ends,
// so two experiments of one name made at once get two keys.
func freeKey(ctx context.Context, q *db.Queries, orgID uuid.UUID, name string) (string, error) {
	if err := q.ExperimentKeyGetForUpdate(ctx, orgID); err != nil {
		return "", err
	}
	base := KeyOf(name)
	taken, err := q.ExperimentListKeysLike(ctx, db.ExperimentListKeysLikeParams{OrgID: orgID, Key: base})
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, k := range taken {
		used[k] = true
	}
	key := base
	for n := 2; used[key]; n++ {
		key = fmt.Sprintf("%s-%d", base, n)
	}
	return key, nil
}

// KeyOf is the key a name reads as: lower case, each run of other
// characters a hyphen, at most 56 characters (room for a number after it),
// "experiment" when nothing is left.
func KeyOf(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_':
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			hyphen = false
		default:
			hyphen = true
		}
	}
	key := strings.TrimLeft(b.String(), "._-")
	if len(key) > 56 {
		key = strings.TrimRight(key[:56], "-._")
	}
	if key == "" {
		return "experiment"
	}
	return key
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Get reads an experiment by key with its arms.
func (s *Service) Get(ctx context.Context, orgID uuid.UUID, key string) (Experiment, error) {
	q := db.New(s.Pool)
	e, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
	if err != nil {
		return Experiment{}, errs.NotFound(err)
	}
	return s.withArms(ctx, q, e)
}

// FreeKey is base as a key no experiment of the organisation has: base
// itself, or base with the first free suffix ("-2", "-3", …), kept within
// a key's 64 characters. A form prefills it; creating still refuses a key
// taken in between.
func (s *Service) FreeKey(ctx context.Context, orgID uuid.UUID, base string) (string, error) {
	q := db.New(s.Pool)
	for n := 1; n <= 1000; n++ {
		key := base
		if n > 1 {
			suffix := "-" + strconv.Itoa(n)
			key = strings.TrimRight(base[:min(len(base), 64-len(suffix))], "-._") + suffix
		}
		_, err := q.ExperimentGetByKey(ctx, db.ExperimentGetByKeyParams{OrgID: orgID, Key: key})
		if err = errs.NotFound(err); errors.Is(err, errs.ErrNotFound) {
			return key, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", nil
}

func (s *Service) withArms(ctx context.Context, q *db.Queries, e db.Experiment) (Experiment, error) {
	out := Experiment{ID: e.ID, Key: e.Key, Name: e.Name, Status: string(e.Status), Seed: e.Seed, Coverage: e.Coverage,
		Metrics: e.Metrics, Guardrails: e.Guardrails, MinSamplePerArm: int(e.MinSamplePerArm), Winner: e.Winner, Conflicts: e.Conflicts,
		RolloutStep: int(e.RolloutStep), StopReason: e.StopReason, StartedAt: e.StartedAt, StartsAt: e.StartsAt, EndsAt: e.EndsAt, EndedAt: e.EndedAt,
		CreatedAt: e.CreatedAt, ModelID: e.RegisteredModelID, Phase: int(e.Phase), PhaseStartedAt: e.PhaseStartedAt, WeightsChanged: e.WeightsChanged,
		Analysis: analysisOf(e)}
	if len(e.RolloutSteps) > 0 {
		out.Rollout = &Rollout{Steps: e.RolloutSteps, HoldMins: int(e.RolloutHold.Microseconds / 60e6), MinUnits: int(e.RolloutMinUnits)}
	}
	arms, err := q.ExperimentArmList(ctx, e.ID)
	if err != nil {
		return Experiment{}, err
	}
	for _, a := range arms {
		arm := Arm{Index: int(a.Idx), Name: a.Name, ModelVersionID: a.ModelVersionID, Version: a.Version, Weight: a.Weight}
		if a.DeploymentID.Valid {
			arm.DeploymentID = &a.DeploymentID.UUID
		}
		out.Arms = append(out.Arms, arm)
	}
	if len(out.Arms) == 2 {
		out.TrafficSplit = out.Arms[1].Weight
	}
	return out, nil
}

// List reads the organisation's experiments, newest first.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]Experiment, error) {
	q := db.New(s.Pool)
	rows, err := q.ExperimentList(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Experiment, 0, len(rows))
	for _, r := range rows {
		e, err := s.withArms(ctx, q, r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// lockByKey reads an experiment for update, in the caller's transaction.
func lockByKey(ctx context.Context, q *db.Queries, orgID uuid.UUID, key string) (db.Experiment, error) {
	e, err := q.ExperimentGetByKeyForUpdate(ctx, db.ExperimentGetByKeyForUpdateParams{OrgID: orgID, Key: key})
	return e, errs.NotFound(err)
}

// transitions are the status moves allowed.
var transitions = map[string][]string{
	Draft:   {Running, Cancelled},
	Running: {Paused, Completed, Cancelled},
	Paused:  {Running, Completed, Cancelled},
}

// SetStatus moves an experiment: start (running), pause, end (completed,
// with the winner: control, treatment or inconclusive) or cancel, audited.
// Starting (or resuming) first makes sure each arm's version is served
// where it will be called (see start).
func (s *Service) SetStatus(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key, status, winner, reason string) (Experiment, error) {
	if status == Completed && !slices.Contains([]string{"control", "treatment", "inconclusive"}, winner) {
		return Experiment{}, errs.InvalidField("winner", "must be control, treatment or inconclusive")
	}
	if status == Running {
		return s.start(ctx, actor, orgID, key, reason)
	}
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		e, err := lockByKey(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		return s.setStatus(ctx, tx, q, actor, e, status, winner, reason)
	})
	if err != nil {
		return Experiment{}, err
	}
	return s.Get(ctx, orgID, key)
}

func canBecome(from db.ExperimentStatus, to string) error {
	if !slices.Contains(transitions[string(from)], to) {
		return &errs.Conflict{Message: fmt.Sprintf("The experiment is %s: it cannot become %s.", from, to)}
	}
	return nil
}

// setStatus moves an experiment in the caller's transaction. An
// experiment that ends lets go of the deployments its arms were called
// at: each is unloaded after its target's grace period unless something
// else uses it.
func (s *Service) setStatus(ctx context.Context, tx pgx.Tx, q *db.Queries, actor audit.Actor, e db.Experiment, status, winner, reason string) error {
	if err := canBecome(e.Status, status); err != nil {
		return err
	}
	if _, err := q.ExperimentUpdateStatus(ctx, db.ExperimentUpdateStatusParams{ID: e.ID, Status: db.ExperimentStatus(status),
		Winner: winner, StopReason: reason}); err != nil {
		return err
	}
	if status == Completed || status == Cancelled {
		arms, err := q.ExperimentArmList(ctx, e.ID)
		if err != nil {
			return err
		}
		var held []uuid.UUID
		for _, a := range arms {
			if a.DeploymentID.Valid {
				held = append(held, a.DeploymentID.UUID)
			}
		}
		if err := s.Models.ReleaseTx(ctx, tx, held); err != nil {
			return err
		}
	}
	if status == Running && len(e.RolloutSteps) > 0 && e.RolloutStepAt == nil {
		if err := q.ExperimentUpdateRollout(ctx, db.ExperimentUpdateRolloutParams{ID: e.ID, RolloutStep: 0}); err != nil {
			return err
		}
	}
	return audit.Record(ctx, q, actor, audit.Entry{OrgID: e.OrgID, Action: "experiment." + status, TargetType: "experiment",
		TargetID: e.ID.String(), Details: map[string]any{"key": e.Key, "winner": winner, "reason": reason}})
}

// Extend moves a running experiment's planned end.
func (s *Service) Extend(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key string, until time.Time) (Experiment, error) {
	if !until.After(s.now()) {
		return Experiment{}, errs.InvalidField("until", "must be in the future")
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		e, err := lockByKey(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		if e.Status != db.ExperimentStatusRunning && e.Status != db.ExperimentStatusPaused {
			return &errs.Conflict{Message: fmt.Sprintf("The experiment is %s: only a running or paused one can be extended.", e.Status)}
		}
		if err := q.ExperimentUpdateEnds(ctx, db.ExperimentUpdateEndsParams{ID: e.ID, EndsAt: &until}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiment.extend", TargetType: "experiment",
			TargetID: e.ID.String(), Details: map[string]any{"until": until}})
	})
	if err != nil {
		return Experiment{}, err
	}
	return s.Get(ctx, orgID, key)
}

// Traffic is what PATCH /api/experiments/:key changes: the arms' weights
// (in arm order, summing to 1), the coverage, and whether to re-randomise.
type Traffic struct {
	Weights  []float64 `json:"weights"`
	Coverage *float64  `json:"coverage"`
	Reseed   bool      `json:"reseed"`
}

// SetTraffic changes an experiment's weights or coverage. Without reseed,
// every unit already exposed keeps its arm and only new units follow the
// new weights (the sample-ratio check is then off for the phase). With
// reseed, a new phase starts under a new seed: units are assigned afresh,
// and results count only the new phase's exposures and feedback. A
// rollout plan owns its experiment's weights, so they are refused there.
func (s *Service) SetTraffic(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key string, in Traffic) (Experiment, error) {
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		e, err := lockByKey(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		if e.Status == db.ExperimentStatusCompleted || e.Status == db.ExperimentStatusCancelled {
			return &errs.Conflict{Message: fmt.Sprintf("The experiment is %s: its traffic cannot change.", e.Status)}
		}
		arms, err := q.ExperimentArmList(ctx, e.ID)
		if err != nil {
			return err
		}
		v := &errs.Invalid{}
		coverage := e.Coverage
		if in.Coverage != nil {
			if coverage = *in.Coverage; !(coverage > 0 && coverage <= 1) {
				v.Add("coverage", "must be above 0 and at most 1")
			}
		}
		if in.Weights != nil {
			if len(e.RolloutSteps) > 0 {
				v.Add("weights", "the rollout plan sets this experiment's weights")
			}
			sum := 0.0
			for i, w := range in.Weights {
				if !(w >= 0 && w <= 1) {
					v.Add(fmt.Sprintf("weights[%d]", i), "must be from 0 to 1")
				}
				sum += w
			}
			if len(in.Weights) != len(arms) {
				v.Add("weights", "give one weight per arm (%d)", len(arms))
			} else if math.Abs(sum-1) > 1e-9 {
				v.Add("weights", "must add up to 1")
			}
		}
		if in.Weights == nil && in.Coverage == nil && !in.Reseed {
			v.Add("weights", "give weights, a coverage or reseed")
		}
		if err := v.Err(); err != nil {
			return err
		}
		changed := false
		for i, w := range in.Weights {
			if w != arms[i].Weight {
				changed = true
				if err := q.ExperimentArmUpdateWeight(ctx, db.ExperimentArmUpdateWeightParams{ExperimentID: e.ID, Idx: arms[i].Idx, Weight: w}); err != nil {
					return err
				}
			}
		}
		p := db.ExperimentUpdateTrafficParams{ID: e.ID, Coverage: coverage, Seed: e.Seed, Phase: e.Phase,
			WeightsChanged: e.WeightsChanged || changed || coverage != e.Coverage}
		if in.Reseed {
			p.Seed, p.Phase, p.WeightsChanged = uuid.NewString(), e.Phase+1, false
		}
		if _, err := q.ExperimentUpdateTraffic(ctx, p); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "experiment.traffic", TargetType: "experiment",
			TargetID: e.ID.String(), Details: map[string]any{"key": key, "weights": in.Weights, "coverage": coverage, "reseed": in.Reseed,
				"phase": p.Phase}})
	})
	if err != nil {
		return Experiment{}, err
	}
	return s.Get(ctx, orgID, key)
}

// FullDeploy sends all traffic to the treatment: the registry deploys the
// treatment's version to production (through the evaluation gate) on the
// target that serves it now, and the experiment ends with the treatment as
// its winner.
func (s *Service) FullDeploy(ctx context.Context, actor audit.Actor, orgID uuid.UUID, key, reason string) (models.Deployment, error) {
	e, err := s.Get(ctx, orgID, key)
	if err != nil {
		return models.Deployment{}, err
	}
	if e.Status != Running && e.Status != Paused {
		return models.Deployment{}, &errs.Conflict{Message: fmt.Sprintf("The experiment is %s: only a running or paused one can be deployed.", e.Status)}
	}
	if reason == "" {
		reason = "Full deploy of experiment " + key
	}
	treatment := e.Arms[len(e.Arms)-1]
	served, err := s.Models.Served(ctx, orgID, treatment.ModelVersionID)
	if err != nil {
		return models.Deployment{}, err
	}
	if served.Target == "" {
		return models.Deployment{}, &errs.Conflict{Message: "The treatment's version is not deployed on any serving target: deploy it (to a staging alias, say) first."}
	}
	d, err := s.Models.Deploy(ctx, actor, orgID, treatment.ModelVersionID, models.DeployRequest{Alias: models.Production, Target: served.Target, Reason: reason})
	if err != nil {
		return models.Deployment{}, err
	}
	_, err = s.SetStatus(ctx, actor, orgID, key, Completed, "treatment", "Fully deployed.")
	return d, err
}
