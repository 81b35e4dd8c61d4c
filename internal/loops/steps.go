package loops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/datasets"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/eval"
	"github.com/curate/curate/internal/experiments"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/hygiene"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
)

// result is what one look at a step found: it is done, it waits for
// something, or it ends the run (skip, fail).
type result struct {
	done    bool
	wait    bool
	skip    string
	fail    string
	detail  string
	links   map[string]string
	outcome any
	cost    pricing.Micros
	// commit runs in the transaction that ends the step, with what it
	// records on the run.
	commit func(q *db.Queries) error
}

// step is where a run stands as a step's job sees it.
type step struct {
	run   db.LoopRun
	spec  Spec
	row   db.LoopRunStep
	links map[string]string
	actor audit.Actor
	since time.Time // when the step started
}

// Advance takes a step of a run. A wait above zero asks the caller to come
// back after it; a step that is not the run's current one (it has moved
// on, or was stopped) is left alone. A failure the step can name ends the
// run with the reason; any other error is the caller's to retry.
func (s *Service) Advance(ctx context.Context, runID uuid.UUID, name string) (time.Duration, error) {
	q := db.New(s.Pool)
	r, err := q.LoopRunGetByID(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // gone with its organisation
	}
	if err != nil {
		return 0, err
	}
	if r.Status != RunRunning || r.Step != name {
		return 0, nil
	}
	var sp Spec
	if err := json.Unmarshal(r.Spec, &sp); err != nil {
		return 0, fmt.Errorf("run %s: spec: %w", runID, err)
	}
	if err := q.LoopStepUpdateStarted(ctx, db.LoopStepUpdateStartedParams{RunID: runID, Name: name}); err != nil {
		return 0, err
	}
	row, err := q.LoopStepGet(ctx, db.LoopStepGetParams{RunID: runID, Name: name})
	if err != nil {
		return 0, err
	}
	st := step{run: r, spec: sp, row: row, links: linksOf(row), actor: actorOf(sp.Name, r.Number), since: s.now()}
	if row.StartedAt != nil {
		st.since = *row.StartedAt
	}
	var res result
	switch name {
	case StepCollect:
		res, err = s.collect(ctx, st)
	case StepDataset:
		res, err = s.dataset(ctx, st)
	case StepFreeze:
		res, err = s.freeze(ctx, st)
	case StepTrain:
		res, err = s.train(ctx, st)
	case StepRegister:
		res, err = s.register(ctx, st)
	case StepStage:
		res, err = s.deploy(ctx, st, sp.Deploy.Alias, sp.Deploy.Target, "Staged by %s to be evaluated.")
	case StepEvaluate:
		res, err = s.evaluate(ctx, st)
	case StepGate:
		res, err = s.gateStep(ctx, st)
	case StepRollout:
		res, err = s.rollout(ctx, st)
	case StepPromote:
		res, err = s.deploy(ctx, st, sp.PromoteAlias, sp.Deploy.PromoteTarget, "Promoted by %s: it passed its evaluation.")
	default:
		return 0, fmt.Errorf("run %s: no step is named %q", runID, name)
	}
	if err != nil {
		return 0, err
	}
	return s.record(ctx, st, res)
}

// record stores what a step found: a waiting step's progress, or its end
// with the next step queued (or the person who must approve it asked for)
// in one transaction.
func (s *Service) record(ctx context.Context, st step, res result) (time.Duration, error) {
	links := maps.Clone(st.links)
	maps.Copy(links, res.links)
	rawLinks, err := json.Marshal(links)
	if err != nil {
		return 0, err
	}
	outcome := st.row.Outcome
	if res.outcome != nil {
		if outcome, err = json.Marshal(res.outcome); err != nil {
			return 0, err
		}
	}
	cost := int64(res.cost)
	update := db.LoopStepUpdateParams{RunID: st.run.ID, Name: st.row.Name, Detail: res.detail, Links: rawLinks, Outcome: outcome, CostMicros: cost}
	if res.wait {
		update.Status = StepRunning
		return s.poll(), db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			if err := q.LoopStepUpdate(ctx, update); err != nil {
				return err
			}
			return q.LoopRunUpdateCost(ctx, db.LoopRunUpdateCostParams{ID: st.run.ID, CostMicros: cost - st.row.CostMicros})
		})
	}
	return 0, db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		r, err := q.LoopRunGetForUpdate(ctx, st.run.ID)
		if err != nil {
			return err
		}
		if r.Status != RunRunning || r.Step != st.row.Name {
			return nil // stopped meanwhile
		}
		if res.commit != nil {
			if err := res.commit(q); err != nil {
				return err
			}
		}
		if err := q.LoopRunUpdateCost(ctx, db.LoopRunUpdateCostParams{ID: r.ID, CostMicros: cost - st.row.CostMicros}); err != nil {
			return err
		}
		update.Finished = true
		switch {
		case res.fail != "":
			update.Status = StepFailed
			if update.Detail == "" {
				update.Detail = res.fail
			}
			if err := q.LoopStepUpdate(ctx, update); err != nil {
				return err
			}
			s.log().Info("a loop run failed", "run", r.ID, "step", r.Step, "reason", res.fail)
			return s.finish(ctx, tx, q, r, st.spec, RunFailed, StepFailed, res.fail)
		case res.skip != "":
			update.Status = StepSkipped
			if update.Detail == "" {
				update.Detail = res.skip
			}
			if err := q.LoopStepUpdate(ctx, update); err != nil {
				return err
			}
			return s.finish(ctx, tx, q, r, st.spec, RunSkipped, StepSkipped, res.skip)
		}
		update.Status = StepSucceeded
		if err := q.LoopStepUpdate(ctx, update); err != nil {
			return err
		}
		steps := Steps(st.spec)
		i := indexOf(steps, r.Step)
		if i == len(steps)-1 {
			return s.finish(ctx, tx, q, r, st.spec, RunSucceeded, StepSucceeded, "")
		}
		next := steps[i+1]
		if err := q.LoopRunUpdateStep(ctx, db.LoopRunUpdateStepParams{ID: r.ID, Step: next}); err != nil {
			return err
		}
		if next == approvalBefore(st.spec) && r.ApprovedAt == nil {
			if err := q.LoopRunUpdateWaiting(ctx, db.LoopRunUpdateWaitingParams{ID: r.ID, WaitingFor: st.spec.Approval}); err != nil {
				return err
			}
			return q.LoopStepUpdate(ctx, db.LoopStepUpdateParams{RunID: r.ID, Name: next, Status: StepWaiting,
				Detail: fmt.Sprintf("Waiting for an admin to approve the %s step.", next), Links: []byte("{}"), Outcome: []byte("{}")})
		}
		_, err = s.Jobs.InsertTx(ctx, tx, StepArgs{RunID: r.ID, Step: next}, nil)
		return err
	})
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// refusal is a service's refusal in words, and whether err was one (bad
// input, a conflict): a step that meets one ends the run with it, since
// trying again would meet it again.
func refusal(err error) (string, bool) {
	var bad *errs.Invalid
	var conflict *errs.Conflict
	switch {
	case errors.As(err, &bad):
		words := make([]string, len(bad.Errors))
		for i, e := range bad.Errors {
			words[i] = strings.TrimSuffix(strings.TrimSpace(e.Field+": "+e.Message), ".")
		}
		return strings.Join(words, "; ") + ".", true
	case errors.As(err, &conflict):
		return conflict.Message, true
	case errors.Is(err, errs.ErrNotFound):
		return "something the step needs no longer exists.", true
	}
	return "", false
}

// describe says what went wrong in words fit for a page.
func describe(err error) string {
	if msg, ok := refusal(err); ok {
		return msg
	}
	return outbound.Describe(err)
}

// counts are the collect step's counts.
type counts struct {
	Matched  int64            `json:"new"`
	Eligible int64            `json:"eligible"`
	Excluded map[string]int64 `json:"excluded"`
	ByPerson int64            `json:"excluded_by_person"`
	// Unsettled are items left out until their overlapping review agrees
	// (or an adjudicator decides), when the organisation reviews with
	// overlap.
	Unsettled int64 `json:"awaiting_agreement"`
}

// countNew counts the items a loop's trigger filter matches that were
// created or reviewed since (every item when since is nil), and why those
// that may not be training data are left out.
func (s *Service) countNew(ctx context.Context, q *db.Queries, orgID uuid.UUID, sp Spec, since *time.Time) (counts, error) {
	f, err := feedback.ParseFilter(sp.Trigger.Filter.Values())
	if err != nil {
		return counts{}, err
	}
	// Overlapping review anywhere makes datasets and pair generation take
	// agreed items only by default: the loop counts as they will take.
	agreed := false
	if s.Review != nil {
		if agreed, err = s.Review.On(ctx, orgID); err != nil {
			return counts{}, err
		}
	}
	m := f.MatchingParams(orgID, 0)
	n, err := q.LoopCountNew(ctx, db.LoopCountNewParams{AgreedOnly: agreed, OrgID: m.OrgID, Status: m.Status, FeedbackType: m.FeedbackType,
		Source: m.Source, RatingMin: m.RatingMin, RatingMax: m.RatingMax, DimBelow: m.DimBelow, Tag: m.Tag, Model: m.Model,
		AssigneeID: m.AssigneeID, CreatedFrom: m.CreatedFrom, CreatedTo: m.CreatedTo, WithDuplicates: m.WithDuplicates,
		PiiOnly: m.PiiOnly, Q: m.Q, DatasetID: m.DatasetID, SafetyOnly: m.SafetyOnly, Since: since})
	if err != nil {
		return counts{}, err
	}
	return counts{Matched: n.Matched, Eligible: n.Eligible, ByPerson: n.ByPerson, Unsettled: n.Unsettled, Excluded: map[string]int64{
		hygiene.RateOutlier: n.RateOutlier, hygiene.DuplicateSpam: n.DuplicateSpam,
		hygiene.NearDuplicateSpam: n.NearDuplicateSpam, hygiene.BotSession: n.BotSession}}, nil
}

// collect flags what hygiene finds in the items since the last collect
// (a day earlier, so a user's day is whole), then counts the new items
// the filter matches and says what it left out and why. Nothing new that
// may be training data skips the run.
func (s *Service) collect(ctx context.Context, st step) (result, error) {
	q := db.New(s.Pool)
	var since *time.Time
	checkFrom := time.Time{}
	prev, err := q.LoopRunGetPreviousCollected(ctx, db.LoopRunGetPreviousCollectedParams{LoopID: st.run.LoopID, RunID: st.run.ID})
	switch {
	case err == nil:
		since, checkFrom = &prev, prev.Add(-hygiene.CheckWindow)
	case !errors.Is(err, pgx.ErrNoRows):
		return result{}, err
	}
	flagged := hygiene.Report{}
	if s.Hygiene != nil {
		if flagged, err = s.Hygiene.Check(ctx, st.run.OrgID, checkFrom); err != nil {
			return result{}, err
		}
	}
	collected := s.now()
	n, err := s.countNew(ctx, q, st.run.OrgID, st.spec, since)
	if err != nil {
		return result{}, err
	}
	res := result{done: true, outcome: map[string]any{"counts": n, "flagged_now": flagged},
		links: map[string]string{"feedback_filter": st.spec.Trigger.Filter.Values().Encode()},
		commit: func(q *db.Queries) error {
			return q.LoopRunUpdateCollected(ctx, db.LoopRunUpdateCollectedParams{ID: st.run.ID, CollectedAt: &collected})
		}}
	res.detail = fmt.Sprintf("%s the filter; %s may be training data.", plural(n.Matched, "new item matches", "new items match"),
		plural(n.Eligible, "item", "items"))
	if left := n.Matched - n.Eligible; left > 0 {
		var why []string
		for _, f := range hygiene.Flags {
			if c := n.Excluded[f]; c > 0 {
				why = append(why, fmt.Sprintf("%d because %s", c, hygiene.Label(f)))
			}
		}
		if n.ByPerson > 0 {
			why = append(why, fmt.Sprintf("%d excluded by a person", n.ByPerson))
		}
		if n.Unsettled > 0 {
			why = append(why, fmt.Sprintf("%d until their reviewers agree", n.Unsettled))
		}
		res.detail += fmt.Sprintf(" Left out %d: %s.", left, strings.Join(why, ", "))
	}
	if n.Eligible == 0 {
		if since != nil {
			res.skip = fmt.Sprintf("Nothing new since the last run collected (%s): no new item matching the filter may be training data.",
				since.UTC().Format("2006-01-02 15:04 MST"))
		} else {
			res.skip = "No item matching the filter may be training data yet."
		}
	}
	return res, nil
}

// dataset generates the recipe's pairs and adds them (or, for supervised
// training, the approved items the filter matches) to the dataset the
// loop appends to, made on the first run; members that may no longer be
// training data are taken out.
func (s *Service) dataset(ctx context.Context, st step) (result, error) {
	q := db.New(s.Pool)
	org, r := st.run.OrgID, st.spec.Dataset.Generate
	var id uuid.UUID
	found, err := q.LoopDatasetGetByName(ctx, db.LoopDatasetGetByNameParams{OrgID: org, Name: st.spec.Dataset.Name})
	switch {
	case err == nil:
		id = found.ID
		if found.DatasetType != r.Type {
			return result{fail: fmt.Sprintf("The dataset %s holds %s examples, and the loop's recipe makes %s ones: rename the loop's dataset.",
				st.spec.Dataset.Name, found.DatasetType, r.Type)}, nil
		}
	case errors.Is(err, pgx.ErrNoRows):
		d, err := s.Datasets.Create(ctx, st.actor, org, datasets.NewDataset{Type: r.Type, Settings: datasets.Settings{Name: st.spec.Dataset.Name,
			Description:  fmt.Sprintf("Made by the loop %s: each of its runs appends to it and freezes a version.", st.spec.Name),
			SystemPrompt: r.SystemPrompt, BaseModel: st.spec.Training.BaseModel, SplitStrategy: r.SplitStrategy,
			ValidationPercent: *r.ValidationPercent, SplitSeed: 42}})
		if msg, ok := refusal(err); ok {
			return result{fail: "The dataset could not be made: " + msg}, nil
		}
		if err != nil {
			return result{}, err
		}
		id = d.ID
	default:
		return result{}, err
	}
	out := map[string]any{}
	added := 0
	if r.Type == datasets.TypeInstructionTuning {
		if added, err = s.Datasets.AddByFilter(ctx, st.actor, org, id, st.spec.Trigger.Filter.Values()); err != nil {
			if msg, ok := refusal(err); ok {
				return result{fail: "The items could not be added: " + msg}, nil
			}
			return result{}, err
		}
	} else {
		made := map[string]int{}
		methods := make([]string, len(r.Methods))
		for i, g := range r.Methods {
			res, err := s.Pairs.Generate(ctx, st.actor, org, g)
			if msg, ok := refusal(err); ok {
				return result{fail: "Pairs could not be generated: " + msg}, nil
			}
			if err != nil {
				return result{}, err
			}
			made[g.Method], methods[i] = res.Created, g.Method
		}
		out["pairs_created"] = made
		p := db.LoopPairListIDsParams{OrgID: org, Methods: methods, MinStrength: float32(r.MinStrength), PairTag: r.Tag,
			RowLimit: datasets.MaxFilterAdd + 1}
		if r.Filter != nil && len(*r.Filter) > 0 {
			f, err := feedback.ParseFilter(r.Filter.Values())
			if err != nil {
				return result{}, err
			}
			m := f.MatchingParams(org, 0)
			p.Filtered, p.Status, p.FeedbackType, p.Source, p.RatingMin, p.RatingMax = true, m.Status, m.FeedbackType, m.Source, m.RatingMin, m.RatingMax
			p.DimBelow, p.Tag, p.Model, p.AssigneeID, p.CreatedFrom, p.CreatedTo = m.DimBelow, m.Tag, m.Model, m.AssigneeID, m.CreatedFrom, m.CreatedTo
			p.PiiOnly, p.Q, p.DatasetID, p.SafetyOnly = m.PiiOnly, m.Q, m.DatasetID, m.SafetyOnly
		}
		ids, err := q.LoopPairListIDs(ctx, p)
		if err != nil {
			return result{}, err
		}
		if len(ids) > datasets.MaxFilterAdd {
			return result{fail: fmt.Sprintf("The recipe selects more than %d pairs: narrow it (a tag, a higher min_strength).", datasets.MaxFilterAdd)}, nil
		}
		for chunk := range slicesChunk(ids, datasets.MaxIDs) {
			n, err := s.Datasets.AddMembers(ctx, st.actor, org, id, chunk)
			if msg, ok := refusal(err); ok {
				return result{fail: "Pairs could not be added: " + msg}, nil
			}
			if err != nil {
				return result{}, err
			}
			added += n
		}
	}
	gone, err := q.LoopMemberListExcluded(ctx, id)
	if err != nil {
		return result{}, err
	}
	removed := 0
	for chunk := range slicesChunk(gone, datasets.MaxIDs) {
		n, err := s.Datasets.RemoveMembers(ctx, st.actor, org, id, chunk)
		if err != nil {
			return result{}, err
		}
		removed += n
	}
	d, err := s.Datasets.Get(ctx, org, id)
	if err != nil {
		return result{}, err
	}
	out["added"], out["removed"], out["members"] = added, removed, d.MemberCount
	detail := fmt.Sprintf("Added %s to %s, which holds %d.", plural(int64(added), memberWord(r.Type), memberWord(r.Type)+"s"), d.Dataset.Name, d.MemberCount)
	if made, ok := out["pairs_created"].(map[string]int); ok {
		var parts []string
		total := 0
		for _, g := range r.Methods {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ReplaceAll(g.Method, "_", " "), made[g.Method]))
			total += made[g.Method]
		}
		detail = fmt.Sprintf("Generated %d new pairs (%s). ", total, strings.Join(parts, ", ")) + detail
	}
	if removed > 0 {
		detail += fmt.Sprintf(" Took out %d that may no longer be training data.", removed)
	}
	return result{done: true, detail: detail, outcome: out, links: map[string]string{"dataset_id": id.String()}}, nil
}

func memberWord(datasetType string) string {
	if datasetType == datasets.TypeInstructionTuning {
		return "item"
	}
	return "pair"
}

// slicesChunk yields s in pieces of at most n.
func slicesChunk[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// freeze freezes a version of the dataset (the same version when its
// content has not changed).
func (s *Service) freeze(ctx context.Context, st step) (result, error) {
	ds, err := s.linkedID(ctx, st.run.ID, StepDataset, "dataset_id")
	if err != nil {
		return result{}, err
	}
	v, err := s.Datasets.Freeze(ctx, st.actor, st.run.OrgID, ds)
	if msg, ok := refusal(err); ok {
		return result{fail: "The dataset could not be frozen: " + msg}, nil
	}
	if err != nil {
		return result{}, err
	}
	d, err := s.Datasets.Get(ctx, st.run.OrgID, ds)
	if err != nil {
		return result{}, err
	}
	return result{done: true,
		detail: fmt.Sprintf("Froze %s v%d: %d examples (%d to train on, %d to validate), content %s.", d.Dataset.Name, v.Number,
			v.ItemCount, v.TrainCount, v.ValidationCount, short(v.ContentHash)),
		links: map[string]string{"dataset_id": ds.String(), "dataset_version_id": v.ID.String()},
		outcome: map[string]any{"version": v.Number, "items": v.ItemCount, "train": v.TrainCount, "validation": v.ValidationCount,
			"content_hash": v.ContentHash},
		commit: func(q *db.Queries) error {
			return q.LoopRunUpdateContent(ctx, db.LoopRunUpdateContentParams{ID: st.run.ID, ContentHash: v.ContentHash,
				DatasetVersionID: uuid.NullUUID{UUID: v.ID, Valid: true}})
		}}, nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12] + "…"
	}
	return hash
}

// linkedID is the id an earlier step of the run linked under key.
func (s *Service) linkedID(ctx context.Context, runID uuid.UUID, stepName, key string) (uuid.UUID, error) {
	row, err := db.New(s.Pool).LoopStepGet(ctx, db.LoopStepGetParams{RunID: runID, Name: stepName})
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.Parse(linksOf(row)[key])
}

// train launches the training of the frozen version, within the loop's
// cost cap and the organisation's budget, and waits for it. Content
// trained before, the same way, is not trained again: the run is skipped.
// A job this step launched before its worker stopped is found and
// followed instead of launching a second.
func (s *Service) train(ctx context.Context, st step) (result, error) {
	org, tr := st.run.OrgID, st.spec.Training
	id := st.links["fine_tuning_job_id"]
	launched := ""
	if id == "" {
		if !st.run.DatasetVersionID.Valid {
			return result{}, fmt.Errorf("run %s: no frozen version to train", st.run.ID)
		}
		hyper, _, bad := s.hyperparameters(tr)
		if len(bad) > 0 {
			return result{fail: fmt.Sprintf("The training cannot start: %s: %s.", bad[0].Field, bad[0].Message)}, nil
		}
		req := finetune.Request{VersionID: st.run.DatasetVersionID.UUID, Provider: tr.Provider, BaseModel: tr.BaseModel,
			Method: provider.Method(tr.Method), Hyper: hyper, Suffix: tr.Suffix, RegisteredModel: st.spec.RegisteredModel}
		est, err := s.FineTune.Estimate(ctx, org, req)
		if msg, ok := refusal(err); ok {
			return result{fail: "The training cannot start: " + msg}, nil
		}
		if err != nil {
			return result{}, err
		}
		q := db.New(s.Pool)
		prior, err := q.LoopFineTuneJobGetByContent(ctx, db.LoopFineTuneJobGetByContentParams{OrgID: org, ContentHash: st.run.ContentHash,
			Provider: tr.Provider, Method: tr.Method, BaseModel: est.Request.BaseModel})
		switch {
		case err == nil && !prior.CreatedAt.Before(st.since):
			id = prior.ID.String() // launched by this step before its worker stopped
		case err == nil:
			return result{skip: fmt.Sprintf("Content %s was trained before, the same way, by %s: there is nothing new to train.",
				short(st.run.ContentHash), prior.Name)}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return result{}, err
		default:
			if cap := pricing.Dollars(tr.MaxCostUSD); est.Cost > cap {
				return result{fail: fmt.Sprintf("The estimate, %s (%d tokens × %d epochs), is above the loop's cap of %s.",
					est.Cost, est.TokensPerEpoch, est.Epochs, cap)}, nil
			}
			job, _, err := s.FineTune.Launch(ctx, st.actor, org, req)
			if msg, ok := refusal(err); ok {
				return result{fail: "The training was refused: " + msg}, nil
			}
			if err != nil {
				return result{}, err
			}
			id, launched = job.ID.String(), fmt.Sprintf("Launched %s at %s, estimated at %s. ", job.Name, job.Provider, est.Cost)
		}
	}
	jobID, err := uuid.Parse(id)
	if err != nil {
		return result{}, err
	}
	d, err := s.FineTune.Get(ctx, org, jobID)
	if err != nil {
		return result{}, err
	}
	j := d.Job
	res := result{links: map[string]string{"fine_tuning_job_id": id}, cost: pricing.Micros(j.EstimatedCost)}
	if j.ActualCost.Valid {
		res.cost = pricing.Micros(j.ActualCost.Int64)
	}
	if stop, err := s.overCap(ctx, st, j, &res); stop || err != nil {
		return res, err
	}
	switch j.Status {
	case db.FinetuneStatusSucceeded:
		res.done = true
		res.detail = fmt.Sprintf("%s trained %s on %d tokens for %s.", j.Name, j.FineTunedModel, j.TrainedTokens, res.cost)
		res.outcome = map[string]any{"fine_tuned_model": j.FineTunedModel, "trained_tokens": j.TrainedTokens, "cost_usd": res.cost.Dollars()}
	case db.FinetuneStatusFailed, db.FinetuneStatusCancelled:
		res.fail = fmt.Sprintf("The training job %s %s: %s", j.Name, j.Status, strings.TrimSpace(j.ErrorMessage))
	default:
		res.wait = true
		state := strings.ReplaceAll(string(j.Status), "_", " ")
		res.detail = launched + fmt.Sprintf("%s is %s.", j.Name, state)
		if j.TotalSteps > 0 {
			res.detail = launched + fmt.Sprintf("%s is %s: step %d of %d.", j.Name, state, j.Step, j.TotalSteps)
		}
	}
	return res, nil
}

// overCap holds the training to the loop's cap on what the provider
// bills, not only on the estimate: once the tokens the provider reports as
// trained cost the cap or more, a job still under way is cancelled at the
// provider (through the fine-tuning service, whose worker carries the
// cancel to the provider's API), and a finished one billed above the cap
// stops the run before anything else is spent on it. Either way the step
// fails saying so; it reports whether it did.
func (s *Service) overCap(ctx context.Context, st step, j db.FineTuningJob, res *result) (bool, error) {
	limit := pricing.Dollars(st.spec.Training.MaxCostUSD)
	billed := pricing.Micros(finetune.ActualCost(j.TrainedTokens, j.PricePerMillion))
	if j.ActualCost.Valid {
		billed = pricing.Micros(j.ActualCost.Int64)
	}
	if j.TrainedTokens == 0 && !j.ActualCost.Valid {
		return false, nil // the provider has reported no billed tokens yet
	}
	switch j.Status {
	case db.FinetuneStatusSucceeded:
		if billed <= limit {
			return false, nil
		}
		res.fail = fmt.Sprintf("The training job %s was billed %s (%d tokens), above the loop's cap of %s: the run stops before registering it.",
			j.Name, billed, j.TrainedTokens, limit)
	case db.FinetuneStatusFailed, db.FinetuneStatusCancelled:
		return false, nil // nothing more is charged; the step says how it ended
	default:
		if billed < limit {
			return false, nil
		}
		var done *errs.Conflict // it finished meanwhile: nothing more is charged
		if _, err := s.FineTune.Cancel(ctx, st.actor, st.run.OrgID, j.ID); err != nil && !errors.As(err, &done) {
			return false, err
		}
		res.fail = fmt.Sprintf("The training job %s has been billed %s (%d tokens), reaching the loop's cap of %s: it is cancelled at %s.",
			j.Name, billed, j.TrainedTokens, limit, j.Provider)
	}
	res.cost = billed
	return true, nil
}

// register takes the version the training job registered when it
// succeeded.
func (s *Service) register(ctx context.Context, st step) (result, error) {
	jobID, err := s.linkedID(ctx, st.run.ID, StepTrain, "fine_tuning_job_id")
	if err != nil {
		return result{}, err
	}
	d, err := s.FineTune.Get(ctx, st.run.OrgID, jobID)
	if err != nil {
		return result{}, err
	}
	v := d.Registered
	if v == nil {
		return result{fail: fmt.Sprintf("The training job %s succeeded but registered no version.", d.Job.Name)}, nil
	}
	return result{done: true, detail: fmt.Sprintf("Registered %s %s (%s).", v.Name, v.Version, v.ModelID),
		links:   map[string]string{"model_version_id": v.ID.String()},
		outcome: map[string]any{"name": v.Name, "version": v.Version, "model_id": v.ModelID, "train_loss": v.TrainLoss, "valid_loss": v.ValidLoss},
		commit: func(q *db.Queries) error {
			return q.LoopRunUpdateModelVersion(ctx, db.LoopRunUpdateModelVersionParams{ID: st.run.ID,
				ModelVersionID: uuid.NullUUID{UUID: v.ID, Valid: true}})
		}}, nil
}

// deploy puts the run's version under an alias on a target (staging it,
// or promoting it) and waits until the target serves it. Asking again for
// what is under way answers the same deployment, so a retried step never
// deploys twice.
func (s *Service) deploy(ctx context.Context, st step, alias, target, why string) (result, error) {
	org := st.run.OrgID
	if !st.run.ModelVersionID.Valid {
		return result{}, fmt.Errorf("run %s: no version to deploy", st.run.ID)
	}
	version := st.run.ModelVersionID.UUID
	id := st.links["deployment_id"]
	if id == "" {
		d, err := s.Models.Deploy(ctx, st.actor, org, version, models.DeployRequest{Alias: alias, Target: target,
			Reason: fmt.Sprintf(why, st.actor.Label)})
		if msg, ok := refusal(err); ok {
			return result{fail: fmt.Sprintf("The version could not go under %s on %s: %s", alias, target, msg)}, nil
		}
		if err != nil {
			return result{}, err
		}
		id = d.ID.String()
	}
	depID, err := uuid.Parse(id)
	if err != nil {
		return result{}, err
	}
	d, err := s.Models.GetDeployment(ctx, org, depID)
	if err != nil {
		return result{}, err
	}
	res := result{links: map[string]string{"deployment_id": id, "model_version_id": version.String()}}
	v, err := s.Models.Get(ctx, org, version)
	if err != nil {
		return result{}, err
	}
	switch d.Status {
	case "succeeded":
		res.done = true
		res.detail = fmt.Sprintf("%s %s is %s on %s.", v.Name, v.Version, alias, d.Target)
		res.outcome = map[string]any{"alias": alias, "target": d.Target, "previous_version_id": d.PreviousVersion}
	case "failed":
		res.fail = fmt.Sprintf("Deploying %s %s under %s on %s failed: %s", v.Name, v.Version, alias, d.Target, d.Error)
	default:
		res.wait = true
		res.detail = fmt.Sprintf("Deploying %s %s under %s on %s: %s.", v.Name, v.Version, alias, d.Target, d.Status)
	}
	return res, nil
}

// evaluate evaluates the staged version on the golden set with the
// policy's judge and reward, and waits for the run to finish. A run of
// the version on the set this step started before its worker stopped is
// followed instead of starting a second, so no item is paid for twice.
func (s *Service) evaluate(ctx context.Context, st step) (result, error) {
	org, e := st.run.OrgID, st.spec.Evaluation
	version := st.run.ModelVersionID.UUID
	id := st.links["evaluation_run_id"]
	if id == "" {
		found, err := db.New(s.Pool).LoopEvaluationRunGetSince(ctx, db.LoopEvaluationRunGetSinceParams{OrgID: org,
			CandidateVersionID: uuid.NullUUID{UUID: version, Valid: true}, GoldenSetVersionID: e.GoldenSetVersionID, Since: st.since})
		switch {
		case err == nil:
			id = found.String()
		case errors.Is(err, pgx.ErrNoRows):
			run, err := s.Eval.Start(ctx, st.actor, org, eval.Config{GoldenSetVersionID: e.GoldenSetVersionID,
				Candidate: eval.Candidate{ModelVersionID: &version}, Judge: e.Judge, Scorers: e.Scorers, RewardFormula: e.RewardFormula})
			if msg, ok := refusal(err); ok {
				return result{fail: "The evaluation cannot start: " + msg}, nil
			}
			if err != nil {
				return result{}, err
			}
			id = run.ID.String()
		default:
			return result{}, err
		}
	}
	runID, err := uuid.Parse(id)
	if err != nil {
		return result{}, err
	}
	row, err := s.Eval.RunRow(ctx, org, runID)
	if err != nil {
		return result{}, err
	}
	res := result{links: map[string]string{"evaluation_run_id": id}}
	switch row.Status {
	case "succeeded":
		run, err := s.Eval.GetRun(ctx, org, runID)
		if err != nil {
			return result{}, err
		}
		sum := run.Summary
		res.done = true
		res.cost = pricing.Dollars(sum.JudgeCostUSD + sum.AnswerCostUSD)
		res.outcome = map[string]any{"mean_reward": sum.MeanReward, "ci": sum.CI, "items": run.Progress.Done, "invalid": sum.Invalid,
			"judge_calls": sum.JudgeCalls, "judge_cost_usd": sum.JudgeCostUSD, "answer_cost_usd": sum.AnswerCostUSD}
		mean := "no mean reward"
		if sum.MeanReward != nil {
			mean = fmt.Sprintf("mean reward %.3f", *sum.MeanReward)
			if len(sum.CI) == 2 {
				mean += fmt.Sprintf(" (95%% interval %.3f to %.3f)", sum.CI[0], sum.CI[1])
			}
		}
		res.detail = fmt.Sprintf("Evaluated %s on %s: %s over %d items, %d judge calls for %s.", row.Candidate, row.GoldenSet, mean,
			run.Progress.Done, sum.JudgeCalls, pricing.Dollars(sum.JudgeCostUSD))
	case "failed":
		run, err := s.Eval.GetRun(ctx, org, runID)
		if err != nil {
			return result{}, err
		}
		res.fail = "The evaluation failed: " + run.Summary.Error
	case "paused":
		run, err := s.Eval.GetRun(ctx, org, runID)
		if err != nil {
			return result{}, err
		}
		res.wait = true
		res.detail = fmt.Sprintf("The evaluation paused at %d of %d: %s Resume it from its page; the run goes on once it finishes.",
			row.Done, row.Total, run.Summary.PausedReason)
	default:
		res.wait = true
		res.detail = fmt.Sprintf("Evaluating %s on %s: %d of %d items.", row.Candidate, row.GoldenSet, row.Done, row.Total)
	}
	return res, nil
}

// gateStep asks the organisation's evaluation gate about the version: a
// gate that blocks it stops the run with the gate's reasons.
func (s *Service) gateStep(ctx context.Context, st step) (result, error) {
	gs, err := s.Models.GateStatus(ctx, st.run.OrgID, st.run.ModelVersionID.UUID)
	if err != nil {
		return result{}, err
	}
	out := map[string]any{"set": gs.Set, "golden_set": gs.GoldenSet, "reasons": gs.Reasons, "overridden": len(gs.Overrides) > 0}
	res := result{outcome: out}
	if gs.Evaluation != uuid.Nil {
		res.links = map[string]string{"evaluation_run_id": gs.Evaluation.String()}
	}
	switch {
	case !gs.Set:
		res.done = true
		res.detail = "The organisation has set no evaluation gate: nothing holds the version back."
	case gs.Blocks():
		res.fail = "The evaluation gate blocks the version: " + strings.Join(gs.Reasons, " ")
	case len(gs.Reasons) > 0:
		res.done = true
		res.detail = fmt.Sprintf("An admin overrode the gate (%s): %s", gs.Overrides[0].Reason, strings.Join(gs.Reasons, " "))
	default:
		res.done = true
		res.detail = fmt.Sprintf("Passes the organisation's gate on %s.", gs.GoldenSet)
	}
	if g := st.spec.Evaluation.Shadow; g != nil && res.done && s.Shadows != nil {
		// The version's shadow is evidence too: the run waits for enough
		// of its queries, and a version that scores too far below what
		// the alias served fails.
		ev, ok, err := s.Shadows.Evidence(ctx, st.run.OrgID, st.run.ModelVersionID.UUID)
		if err != nil {
			return result{}, err
		}
		wait, fail, detail := ShadowVerdict(*g, ev, ok)
		out["shadow"] = map[string]any{"queries": ev.Difference.N, "difference": ev.Difference.Mean, "ci": ev.Difference.CI}
		if ok {
			if res.links == nil {
				res.links = map[string]string{}
			}
			res.links["shadow_id"] = ev.ShadowID.String()
		}
		switch {
		case wait:
			res.done, res.wait, res.detail = false, true, detail
		case fail != "":
			res.done, res.fail = false, "The version's shadow blocks it: "+fail
		default:
			res.detail += " " + detail
		}
	}
	return res, nil
}

// rollout takes the version to production through an A/B experiment
// against the version the promoted alias holds, stepping its share of
// traffic up while its guardrails hold (internal/experiments), and waits
// until the experiment deploys it or rolls it back. With nothing in
// production to test against, the version is promoted at once.
func (s *Service) rollout(ctx context.Context, st step) (result, error) {
	org, sp := st.run.OrgID, st.spec
	version := st.run.ModelVersionID.UUID
	key := st.links["experiment_key"]
	if key == "" {
		if st.links["deployment_id"] != "" {
			return s.deploy(ctx, st, sp.PromoteAlias, sp.Deploy.PromoteTarget, "Promoted by %s: nothing was in production to roll out against.")
		}
		prod, err := db.New(s.Pool).LoopAliasVersionGet(ctx, db.LoopAliasVersionGetParams{OrgID: org, Model: sp.RegisteredModel, Alias: sp.PromoteAlias})
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && prod == version) {
			return s.deploy(ctx, st, sp.PromoteAlias, sp.Deploy.PromoteTarget, "Promoted by %s: nothing was in production to roll out against.")
		}
		if err != nil {
			return result{}, err
		}
		key = experimentKey(sp.Name, st.run.Number)
		e, err := s.Experiments.Get(ctx, org, key)
		if errors.Is(err, errs.ErrNotFound) {
			e, err = s.Experiments.Create(ctx, st.actor, org, rolloutExperiment(sp, key, st.run.Number, prod, version))
		}
		if msg, ok := refusal(err); ok {
			return result{fail: "The rollout could not be set up: " + msg}, nil
		}
		if err != nil {
			return result{}, err
		}
		if e.Status == experiments.Draft {
			_, err := s.Experiments.SetStatus(ctx, st.actor, org, key, experiments.Running, "", "Started by "+st.actor.Label+".")
			if msg, ok := refusal(err); ok {
				return result{fail: "The rollout could not start: " + msg}, nil
			}
			if err != nil {
				return result{}, err
			}
		}
	}
	e, err := s.Experiments.Get(ctx, org, key)
	if err != nil {
		return result{}, err
	}
	res := result{links: map[string]string{"experiment_key": key}, outcome: map[string]any{"status": e.Status, "rollout_step": e.RolloutStep}}
	switch e.Status {
	case experiments.Completed:
		res.done = true
		res.detail = fmt.Sprintf("The rollout %s passed every step; the version is %s.", key, sp.PromoteAlias)
	case experiments.Paused, experiments.Cancelled:
		res.fail = fmt.Sprintf("The rollout %s stopped: %s", key, e.StopReason)
	default:
		res.wait = true
		share := 0.0
		if e.Rollout != nil && e.RolloutStep < len(e.Rollout.Steps) {
			share = e.Rollout.Steps[e.RolloutStep]
		}
		res.detail = fmt.Sprintf("Rolling out through %s: the new version takes %.0f%% of traffic.", key, 100*share)
	}
	return res, nil
}

// experimentKey is the key of a run's rollout experiment.
func experimentKey(loop string, number int32) string {
	suffix := fmt.Sprintf("-run-%d", number)
	if len(loop)+len(suffix) > 64 {
		loop = strings.TrimRight(loop[:64-len(suffix)], "-._")
	}
	return loop + suffix
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// rolloutExperiment is the experiment a run's rollout step sets up between
// production's version and the run's: the policy's metrics and rollout
// plan, and as the least sample per arm its plan's units per arm, so the
// panel waits for what the steps wait for (2 units per arm, not the
// default 100).
func rolloutExperiment(sp Spec, key string, run int32, prod, version uuid.UUID) experiments.NewExperiment {
	in := experiments.NewExperiment{Key: key, Name: fmt.Sprintf("Rollout of %s run #%d", sp.Name, run),
		ControlModelID: prod, TreatmentModelID: version, Metrics: sp.Rollout.Metrics, Guardrails: sp.Rollout.Guardrails,
		Rollout: &sp.Rollout.Rollout}
	if sp.Rollout.MinUnits > 0 {
		n := max(sp.Rollout.MinUnits, 2) // the least an experiment takes
		in.MinSamplePerArm = &n
	}
	return in
}
