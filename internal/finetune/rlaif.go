package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/rlaif"
)

// RLAIF: a local GRPO or PPO job whose settings name policy.rlaif takes
// its reward from Curate. The launch checks the reward (the formula, its
// scorers and teacher, through RLAIFChecker) and that the dataset
// version's training prompts hold the red-team share; the step that starts
// the trainer gives the run an API key of its own, revoked when the job
// ends, and the URL of its POST /api/train/:id/rewards.

// RLAIFChecker checks a run's reward configuration (internal/rlaif.Service).
type RLAIFChecker interface {
	Check(ctx context.Context, orgID uuid.UUID, field string, cfg rlaif.Config) (rlaif.Plan, error)
}

// SetTrainerAPI sets the address at which trainers reach Curate's API
// ("http://127.0.0.1:8080"), for a server whose address is known only once
// it listens. It may be called while the service is in use.
func (s *Service) SetTrainerAPI(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.TrainerAPI = url
}

func (s *Service) trainerAPI() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimRight(s.TrainerAPI, "/")
}

// rlaifOf is the RLAIF settings of a policy-method request, nil when it has none.
func rlaifOf(method provider.Method, settings *local.Settings) *local.RLAIFSettings {
	if settings == nil || (method != local.GRPO && method != local.PPO) {
		return nil
	}
	return settings.Policy.RLAIF
}

// checkRLAIF refuses a launch whose RLAIF reward cannot score, or whose
// training prompts hold fewer red-team prompts than its share requires.
func (s *Service) checkRLAIF(ctx context.Context, orgID uuid.UUID, req Request, label string) error {
	r := rlaifOf(req.Method, req.Local)
	if r == nil {
		return nil
	}
	const field = "local.policy.rlaif"
	if s.RLAIF != nil {
		cfg, err := rlaif.ConfigOf(*r, field)
		if err != nil {
			return err
		}
		if _, err := s.RLAIF.Check(ctx, orgID, field, cfg); err != nil {
			return err
		}
	}
	share := r.Share()
	if share == 0 {
		return nil
	}
	src, err := s.source()
	if err != nil {
		return err
	}
	prompts, total, err := src.Tagged(ctx, orgID, req.VersionID, r.Tag())
	if err != nil {
		return err
	}
	tagged := len(prompts)
	need := int(math.Ceil(share*float64(total) - 1e-9))
	if total == 0 || tagged < need {
		pct := 0.0
		if total > 0 {
			pct = 100 * float64(tagged) / float64(total)
		}
		return errs.InvalidField(field+".red_team_share",
			"%s has %d prompts tagged %s among its %d training prompts (%.0f%%); RLAIF needs at least %.0f%% (%d): tag more prompts %s, or lower red_team_share",
			label, tagged, r.Tag(), total, pct, 100*share, max(need, 1), r.Tag())
	}
	return nil
}

// RedTeamPrompts are the red-team prompts (the last user message of each
// training example carrying the run's red-team tag) of a GRPO or PPO job
// launched with RLAIF, for marking the samples scored for it; none for
// another job. A version never changes, so they are read once per job.
func (s *Service) RedTeamPrompts(ctx context.Context, orgID, jobID uuid.UUID) (map[string]bool, error) {
	if got, ok := s.redTeam.Load(jobID); ok {
		return got.(map[string]bool), nil
	}
	j, err := db.New(s.Pool).FineTuneJobGet(ctx, db.FineTuneJobGetParams{OrgID: orgID, ID: jobID})
	if err != nil {
		return nil, errs.NotFound(err)
	}
	var settings local.Settings
	if len(j.LocalSettings) > 0 {
		if err := json.Unmarshal(j.LocalSettings, &settings); err != nil {
			return nil, err
		}
	}
	out := map[string]bool{}
	if r := rlaifOf(provider.Method(j.Method), &settings); r != nil {
		src, err := s.source()
		if err != nil {
			return nil, err
		}
		prompts, _, err := src.Tagged(ctx, orgID, j.DatasetVersionID, r.Tag())
		if err != nil {
			return nil, err
		}
		for _, p := range prompts {
			out[strings.TrimSpace(p)] = true
		}
	}
	s.redTeam.Store(jobID, out)
	return out, nil
}

// rewardAPI gives a local RLAIF job's trainer its reward API: a curator
// key of its own (replacing one an earlier start made), kept so that the
// job's end revokes it, and the URL. nil for any other job.
func (s *Service) rewardAPI(ctx context.Context, j db.FineTuningJob) (*local.RewardAPI, error) {
	var settings local.Settings
	if len(j.LocalSettings) > 0 {
		if err := json.Unmarshal(j.LocalSettings, &settings); err != nil {
			return nil, err
		}
	}
	if rlaifOf(provider.Method(j.Method), &settings) == nil {
		return nil, nil
	}
	base := s.trainerAPI()
	if base == "" {
		return nil, &provider.Error{Provider: j.Provider, Op: "start trainer", Permanent: true,
			Message: "the run takes its reward from Curate, but no address for trainers to reach Curate is set (CURATE_TRAINER_API_URL)"}
	}
	full, prefix, hash := auth.NewAPIKey()
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := revokeRunKey(ctx, q, j); err != nil {
			return err
		}
		k, err := q.APIKeyInsert(ctx, db.APIKeyInsertParams{OrgID: j.OrgID, Name: "Training run " + j.ID.String(), Prefix: prefix,
			SecretHash: hash, Role: db.UserRoleCurator})
		if err != nil {
			return err
		}
		if err := q.FineTuneRunKeyInsertOrUpdate(ctx, db.FineTuneRunKeyInsertOrUpdateParams{JobID: j.ID, OrgID: j.OrgID, ApiKeyID: k.ID}); err != nil {
			return err
		}
		return audit.Record(ctx, q, audit.System, audit.Entry{OrgID: j.OrgID, Action: "api_key.create", TargetType: "api_key",
			TargetID: k.ID.String(), Details: map[string]any{"name": k.Name, "role": k.Role, "prefix": k.Prefix, "fine_tuning_job": j.ID.String()}})
	})
	if err != nil {
		return nil, err
	}
	return &local.RewardAPI{URL: base + "/api/train/" + j.ID.String() + "/rewards", Token: full}, nil
}

// revokeRunKey revokes the key a run holds, if any.
func revokeRunKey(ctx context.Context, q *db.Queries, j db.FineTuningJob) error {
	rows, err := q.APIKeyUpdateRevokedForRun(ctx, db.APIKeyUpdateRevokedForRunParams{JobID: j.ID, OrgID: j.OrgID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range rows {
		if err := audit.Record(ctx, q, audit.System, audit.Entry{OrgID: j.OrgID, Action: "api_key.revoke", TargetType: "api_key",
			TargetID: k.ID.String(), Details: map[string]any{"name": k.Name, "prefix": k.Prefix, "fine_tuning_job": j.ID.String()}}); err != nil {
			return err
		}
	}
	return nil
}
