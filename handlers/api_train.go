package handlers

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/rlaif"
)

// The training API of Curate's IRS design (seed 003, section 4), mapped
// onto local fine-tuning jobs: a stage is a method, model_id the base
// model's name in the models directory, irs_config the IRS settings and
// grpo_config the settings of the policy stages, GRPO and PPO.

// trainStages maps the design's stages to methods.
var trainStages = map[string]provider.Method{
	"IRS": local.IRS, "SFT": provider.Supervised, "DPO": provider.DPO, "REWARD": local.Reward,
	"GRPO": local.GRPO, "PPO": local.PPO,
}

// stageOf is the design's stage of a method.
func stageOf(m string) string {
	for stage, method := range trainStages {
		if string(method) == m {
			return stage
		}
	}
	return strings.ToUpper(m)
}

// irsConfig is the design's irs_config: the IRS settings and a switch the
// local trainer does not offer.
type irsConfig struct {
	local.IRSSettings
	LoadIn4Bit *bool `json:"load_in_4bit"`
}

// trainFields renames the launch's field names to the request's.
var trainFields = map[string]string{"method": "stage", "base_model": "model_id", "provider": "stage",
	"local.irs.n_questions": "n_questions"}

func trainField(f string) string {
	if to, ok := trainFields[f]; ok {
		return to
	}
	if rest, ok := strings.CutPrefix(f, "local.irs."); ok {
		return "irs_config." + rest
	}
	if rest, ok := strings.CutPrefix(f, "local.policy."); ok {
		return "grpo_config." + rest
	}
	return f
}

// APITrain starts a local training job: 201 with {"job_id": ...} and the
// dataset version it trains, or 422 naming each bad field as the request
// names it. Without dataset_version_id it trains the organisation's newest
// frozen version suitable for the stage (the design's requests name no
// dataset), and the job's events say so. n_iterations may come at the top,
// as the design's smoke test sends it, for irs_config.n_iterations.
func (h *Handlers) APITrain(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var body struct {
		Stage            string                   `json:"stage"`
		ModelID          string                   `json:"model_id"`
		DatasetVersionID string                   `json:"dataset_version_id"`
		IRSConfig        *irsConfig               `json:"irs_config"`
		GRPOConfig       *local.PolicySettings    `json:"grpo_config"` // GRPO and PPO
		NQuestions       int                      `json:"n_questions"`
		NIterations      int                      `json:"n_iterations"`
		TopK             *int                     `json:"top_k"` // the design's retrieval depth: prompts here carry their context, so it is not used
		Hyperparameters  provider.Hyperparameters `json:"hyperparameters"`
		Local            *local.Settings          `json:"local"` // LoRA and other trainer settings
	}
	if err := decodeJSON(c, &body, ""); err != nil {
		return err
	}
	bad := &errs.Invalid{}
	method, ok := trainStages[body.Stage]
	if !ok {
		bad.Add("stage", `must be "IRS", "SFT", "DPO", "REWARD", "GRPO" or "PPO"`)
	}
	req := finetune.Request{Provider: local.Name, BaseModel: body.ModelID, Method: method, Hyper: body.Hyperparameters, Local: body.Local}
	if body.DatasetVersionID != "" {
		if err := req.VersionID.UnmarshalText([]byte(body.DatasetVersionID)); err != nil {
			bad.Add("dataset_version_id", "must be a dataset version id")
		}
	} else {
		req.NewestSuitable = true
	}
	if body.NIterations != 0 {
		if body.IRSConfig != nil && body.IRSConfig.NIterations != 0 {
			bad.Add("n_iterations", "is irs_config.n_iterations: send one of them")
		} else if body.IRSConfig == nil {
			body.IRSConfig = &irsConfig{}
		}
		body.IRSConfig.NIterations = body.NIterations
	}
	if body.GRPOConfig != nil {
		if method != local.GRPO && method != local.PPO {
			bad.Add("grpo_config", "applies only to the GRPO and PPO stages")
		}
		if req.Local == nil {
			req.Local = &local.Settings{}
		}
		req.Local.Policy = *body.GRPOConfig
	}
	if body.IRSConfig != nil || body.NQuestions != 0 {
		if req.Local == nil {
			req.Local = &local.Settings{}
		}
		if body.IRSConfig != nil {
			if body.IRSConfig.LoadIn4Bit != nil && *body.IRSConfig.LoadIn4Bit {
				bad.Add("irs_config.load_in_4bit", "the local trainer loads models in their dtype (local.dtype); 4-bit loading is not offered, so leave it false or out")
			}
			req.Local.IRS = body.IRSConfig.IRSSettings
		}
		if body.NQuestions != 0 {
			req.Local.IRS.NQuestions = body.NQuestions
		}
	}
	if bad.Has() {
		return bad
	}
	job, _, err := h.FineTune.Launch(ctx(c), actor(c), CallerOf(c).OrgID, req)
	if err != nil {
		return renameFields(err, trainField)
	}
	return c.JSON(http.StatusCreated, map[string]string{"job_id": job.ID.String(), "dataset_version_id": job.DatasetVersionID.String(),
		"dataset": job.DatasetLabel})
}

// trainStatus is the design's status answer, with the resulting model and
// the error added.
type trainStatus struct {
	JobID  string      `json:"job_id"`
	Stage  string      `json:"stage"`
	State  string      `json:"state"`
	Detail trainDetail `json:"detail"`
	// The dataset version trained, and its name ("support v3").
	DatasetVersionID string `json:"dataset_version_id"`
	Dataset          string `json:"dataset"`
}

type trainDetail struct {
	// IRS: the iteration; other stages: the epoch.
	CurrentIteration int              `json:"current_iteration"`
	TotalIterations  int              `json:"total_iterations"`
	CurrentPhase     string           `json:"current_phase"`
	PhaseProgress    float64          `json:"phase_progress"` // percent
	Metrics          trainMetrics     `json:"metrics"`
	Runtime          finetune.Runtime `json:"runtime"`
	Model            string           `json:"model,omitempty"` // the adapter (or reward model) directory, once saved
	Error            string           `json:"error,omitempty"`
	StoppedEarly     string           `json:"stopped_early,omitempty"` // why the run ended before its last step, when it did
}

type trainMetrics struct {
	// IRS: the last iteration's average reward; GRPO and PPO: the last
	// step's mean reward, with its KL from the reference and clip fraction.
	AvgReward       *float64           `json:"avg_reward"`
	RewardBreakdown map[string]float64 `json:"reward_breakdown"`
	CurrentWeights  map[string]float64 `json:"current_weights"`
	Loss            *float64           `json:"loss,omitempty"` // the last training loss
	KL              *float64           `json:"kl,omitempty"`
	ClipFraction    *float64           `json:"clip_fraction,omitempty"`
	HeldOutScore    *float64           `json:"heldout_score,omitempty"` // the last held-out check
}

// APITrainStatus answers GET /api/train/status/:id.
func (h *Handlers) APITrainStatus(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	j := d.Job
	lines, err := h.FineTune.RunMetrics(ctx(c), j)
	if err != nil {
		return err
	}
	points, phase := finetune.IRSSummary(lines)
	out := trainStatus{JobID: j.ID.String(), Stage: stageOf(j.Method), State: string(j.Status),
		DatasetVersionID: j.DatasetVersionID.String(), Dataset: j.DatasetLabel,
		Detail: trainDetail{CurrentPhase: strings.ToUpper(phase.Phase), Model: j.FineTunedModel, Error: j.ErrorMessage,
			Metrics: trainMetrics{RewardBreakdown: map[string]float64{}, CurrentWeights: map[string]float64{}},
		}}
	if j.Method == string(local.IRS) {
		out.Detail.TotalIterations = totalIterations(j)
		out.Detail.CurrentIteration = phase.Iter
		if n := len(points); n > 0 {
			last := points[n-1]
			out.Detail.Metrics.AvgReward = last.AvgReward
			out.Detail.Metrics.RewardBreakdown = orEmpty(last.RewardBreakdown)
			out.Detail.Metrics.CurrentWeights = orEmpty(last.NextWeights)
			if last.NextWeights == nil {
				out.Detail.Metrics.CurrentWeights = orEmpty(last.Weights)
			}
		}
	} else {
		out.Detail.CurrentIteration, out.Detail.TotalIterations = int(j.Epoch), int(j.TotalEpochs)
	}
	if j.Method == string(local.GRPO) || j.Method == string(local.PPO) {
		steps, checks := finetune.PolicySummary(lines)
		if n := len(steps); n > 0 {
			last := steps[n-1]
			m := &out.Detail.Metrics
			m.AvgReward, m.KL, m.ClipFraction, m.RewardBreakdown = last.Reward, last.KL, last.ClipFraction, orEmpty(last.RewardBreakdown)
		}
		if n := len(checks); n > 0 {
			out.Detail.Metrics.HeldOutScore = checks[n-1].Score
		}
	}
	if reasons := finetune.StopReasons(lines); len(reasons) > 0 {
		out.Detail.StoppedEarly = reasons[len(reasons)-1]
	}
	switch {
	case phase.Progress != nil:
		out.Detail.PhaseProgress = *phase.Progress
	default:
		if f, ok := finetune.Progress(j); ok {
			out.Detail.PhaseProgress = f * 100
		}
	}
	if out.Detail.CurrentPhase == "" {
		out.Detail.CurrentPhase = strings.ToUpper(string(j.Status))
	}
	for _, m := range d.Metrics {
		if m.TrainLoss.Valid {
			out.Detail.Metrics.Loss = &m.TrainLoss.Float64
		}
	}
	if out.Detail.Runtime, err = h.FineTune.JobRuntime(ctx(c), j, lines); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// totalIterations is an IRS job's n_iterations, or the design's default.
func totalIterations(j db.FineTuningJob) int {
	var s local.Settings
	if json.Unmarshal(j.LocalSettings, &s) == nil && s.IRS.NIterations > 0 {
		return s.IRS.NIterations
	}
	return local.DefaultIRS().NIterations
}

func orEmpty(m map[string]float64) map[string]float64 {
	if m == nil {
		return map[string]float64{}
	}
	return m
}

// APITrainMetrics answers GET /api/train/:id/metrics: the run's
// metrics.jsonl as a JSON array of its lines (the newest 20,000 at most),
// from the database, whichever machine trains the job.
func (h *Handlers) APITrainMetrics(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	d, err := h.fineTuneDetail(c)
	if err != nil {
		return err
	}
	lines, err := h.FineTune.RunMetrics(ctx(c), d.Job)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, lines)
}

// APITrainRewards answers POST /api/train/:id/rewards: a GRPO or PPO run's
// step of samples scored with the reward formula through Curate's scorers
// (RLAIF), each kept with its components and the teacher's cost.
func (h *Handlers) APITrainRewards(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var req rlaif.Request
	if err := decodeJSON(c, &req, ""); err != nil {
		return err
	}
	scored, err := h.RLAIF.ScoreRun(ctx(c), CallerOf(c).OrgID, id, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"data": scored})
}
