package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/auth"
)

// Route is one entry of the application's surface: who may call what.
type Route struct {
	Method  string
	Path    string
	Role    auth.Role // the least role allowed; Public for everyone
	Handler echo.HandlerFunc
}

// Public marks routes that need no sign-in.
const Public auth.Role = ""

// Routes is every route of Curate with the least role it needs. Reading it
// tells the whole surface of the application.
func Routes(h *handlers.Handlers) []Route {
	const (
		GET   = http.MethodGet
		POST  = http.MethodPost
		PATCH = http.MethodPatch
	)
	return []Route{
		// Operations.
		{GET, "/healthz", Public, h.Healthz},
		{GET, "/readyz", Public, h.Readyz},

		// Signing in and out.
		{GET, "/login", Public, h.LoginForm},
		{POST, "/login", Public, h.Login},
		{POST, "/logout", auth.Viewer, h.Logout},
		{GET, "/account", auth.Viewer, h.Account},
		{POST, "/account/password", auth.Viewer, h.AccountPassword},
		{POST, "/account/sign-out-everywhere", auth.Viewer, h.SignOutEverywhere},

		// The Curate tab.
		{GET, "/", auth.Viewer, h.Home},

		// Feedback queue pages.
		{GET, "/feedback", auth.Viewer, h.FeedbackQueue},
		{GET, "/feedback/counts", auth.Viewer, h.FeedbackCounts},
		{GET, "/feedback/:id", auth.Viewer, h.FeedbackItem},
		{POST, "/feedback/bulk", auth.Curator, h.FeedbackBulk},
		{POST, "/feedback/add-to-dataset", auth.Curator, h.FeedbackToDataset},
		{POST, "/feedback/:id/status", auth.Curator, h.FeedbackStatus},
		{POST, "/feedback/:id/correction", auth.Curator, h.FeedbackCorrection},
		{POST, "/feedback/:id/tags", auth.Curator, h.FeedbackTags},
		{POST, "/feedback/:id/note", auth.Curator, h.FeedbackNote},
		{POST, "/feedback/:id/assign", auth.Curator, h.FeedbackAssign},
		{POST, "/feedback/:id/auto-advance", auth.Curator, h.FeedbackAutoAdvance},
		{POST, "/feedback/:id/diff", auth.Curator, h.FeedbackDiff},

		// Stats and alerts.
		{GET, "/stats", auth.Viewer, h.Stats},
		{GET, "/stats/retention", auth.Admin, h.RetentionSettings},
		{POST, "/stats/retention", auth.Admin, h.RetentionSettingsSave},
		{GET, "/alerts", auth.Viewer, h.AlertList},
		{POST, "/alerts/:id/dismiss", auth.Curator, h.AlertDismiss},
		{GET, "/alerts/settings", auth.Admin, h.AlertSettings},
		{POST, "/alerts/settings", auth.Admin, h.AlertSettingsSave},
		{POST, "/alerts/settings/secret", auth.Admin, h.AlertSecretCreate},

		// Imports.
		{GET, "/imports", auth.Curator, h.ImportList},
		{POST, "/imports", auth.Curator, h.ImportCreate},
		{GET, "/imports/runs/:id/row", auth.Curator, h.ImportRunRow},
		{GET, "/imports/langfuse", auth.Curator, h.Langfuse},
		{GET, "/imports/langfuse/status", auth.Curator, h.LangfuseStatus},
		{POST, "/imports/langfuse", auth.Admin, h.LangfuseSave},
		{POST, "/imports/langfuse/test", auth.Admin, h.LangfuseTest},
		{POST, "/imports/langfuse/sync", auth.Curator, h.LangfuseSyncNow},

		// Preference pairs.
		{GET, "/pairs", auth.Viewer, h.PairList},
		{GET, "/pairs/new", auth.Viewer, h.PairNew},
		{POST, "/pairs", auth.Curator, h.PairCreate},
		{POST, "/pairs/add-to-dataset", auth.Curator, h.PairsToDataset},
		{GET, "/pairs/rank", auth.Viewer, h.PairRank},
		{POST, "/pairs/rank", auth.Curator, h.PairRankSave},
		{GET, "/pairs/rank/queries", auth.Viewer, h.PairRankQueries},
		{GET, "/pairs/generate", auth.Viewer, h.PairGenerate},
		{POST, "/pairs/generate", auth.Curator, h.PairGenerateConfirm},
		{GET, "/pairs/:id", auth.Viewer, h.PairEdit},
		{POST, "/pairs/:id", auth.Curator, h.PairSave},
		{POST, "/pairs/:id/delete", auth.Curator, h.PairDelete},
		{POST, "/api/preference-pairs", auth.Curator, h.APIPairCreate},
		{POST, "/api/preference-pairs/bulk", auth.Curator, h.APIPairBulk},
		{GET, "/api/preference-pairs", auth.Viewer, h.APIPairList},
		{GET, "/api/preference-pairs/:id", auth.Viewer, h.APIPairGet},
		{PATCH, "/api/preference-pairs/:id", auth.Curator, h.APIPairPatch},
		{http.MethodDelete, "/api/preference-pairs/:id", auth.Curator, h.APIPairDelete},

		// Training datasets.
		{GET, "/datasets", auth.Viewer, h.DatasetList},
		{POST, "/datasets", auth.Curator, h.DatasetCreate},
		{GET, "/datasets/:id", auth.Viewer, h.Dataset},
		{POST, "/datasets/:id", auth.Curator, h.DatasetUpdate},
		{POST, "/datasets/:id/status", auth.Curator, h.DatasetStatus},
		{POST, "/datasets/:id/members", auth.Curator, h.DatasetMembersAdd},
		{POST, "/datasets/:id/members/filter", auth.Curator, h.DatasetMembersFilter},
		{POST, "/datasets/:id/members/remove", auth.Curator, h.DatasetMembersRemove},
		{POST, "/datasets/:id/exports", auth.Curator, h.DatasetExportStart},
		{GET, "/datasets/:id/exports/:eid", auth.Viewer, h.DatasetExportRow},
		{POST, "/api/training-datasets", auth.Curator, h.APIDatasetCreate},
		{GET, "/api/training-datasets", auth.Viewer, h.APIDatasetList},
		{GET, "/api/training-datasets/:id", auth.Viewer, h.APIDatasetGet},
		{PATCH, "/api/training-datasets/:id", auth.Curator, h.APIDatasetPatch},
		{http.MethodDelete, "/api/training-datasets/:id", auth.Curator, h.APIDatasetArchive},
		{POST, "/api/training-datasets/:id/members", auth.Curator, h.APIDatasetMembers},
		{GET, "/api/training-datasets/:id/validation", auth.Viewer, h.APIDatasetValidation},
		{POST, "/api/training-datasets/:id/export", auth.Curator, h.APIDatasetExport},
		{GET, "/api/training-datasets/:id/exports/:eid", auth.Viewer, h.APIDatasetExportGet},
		{GET, "/api/training-datasets/:id/exports/:eid/files/:name", auth.Curator, h.DatasetExportFile},

		// Fine-tuning.
		{GET, "/fine-tuning", auth.Viewer, h.FineTuneJobs},
		{GET, "/fine-tuning/new", auth.Admin, h.FineTuneNew},
		{POST, "/fine-tuning/estimate", auth.Admin, h.FineTuneEstimate},
		// The form posts to its own address, where a refusal can be
		// reloaded; the older address opens the list.
		{POST, "/fine-tuning/new", auth.Admin, h.FineTuneLaunch},
		{POST, "/fine-tuning/jobs", auth.Admin, h.FineTuneLaunch},
		{GET, "/fine-tuning/jobs", auth.Viewer, h.FineTuneJobsOpen},
		{GET, "/fine-tuning/jobs/:id", auth.Viewer, h.FineTuneJob},
		{GET, "/fine-tuning/jobs/:id/live", auth.Viewer, h.FineTuneJobLive},
		{POST, "/fine-tuning/jobs/:id/cancel", auth.Admin, h.FineTuneCancel},
		{GET, "/fine-tuning/settings", auth.Admin, h.FineTuneSettings},
		{POST, "/fine-tuning/budget", auth.Admin, h.FineTuneBudgetSave},
		{POST, "/fine-tuning/prices", auth.Admin, h.FineTunePricesSave},
		{POST, "/api/fine-tuning/jobs", auth.Admin, h.APIFineTuneLaunch},
		{GET, "/api/fine-tuning/jobs", auth.Viewer, h.APIFineTuneList},
		{GET, "/api/fine-tuning/jobs/:id", auth.Viewer, h.APIFineTuneGet},
		{POST, "/api/fine-tuning/jobs/:id/cancel", auth.Admin, h.APIFineTuneCancel},

		// Model registry and serving targets.
		{GET, "/models", auth.Viewer, h.ModelRegistry},
		{POST, "/models", auth.Admin, h.ModelRegister},
		{GET, "/models/targets", auth.Admin, h.Targets},
		{POST, "/models/targets", auth.Admin, h.TargetCreate},
		{GET, "/models/compare", auth.Viewer, h.ModelCompare},
		{GET, "/models/versions/:id", auth.Viewer, h.ModelVersion},
		{GET, "/models/versions/:id/deployments", auth.Viewer, h.ModelVersionDeployments},
		{POST, "/models/versions/:id/deploy", auth.Admin, h.ModelDeploy},
		{POST, "/models/versions/:id/rollback", auth.Admin, h.ModelRollback},
		{POST, "/models/versions/:id/status", auth.Admin, h.ModelStatus},
		{POST, "/models/versions/:id/number", auth.Admin, h.ModelNumber},
		{POST, "/models/versions/:id/override", auth.Admin, h.ModelGateOverride},
		{GET, "/api/models", auth.Viewer, h.APIModelList},
		{POST, "/api/models", auth.Admin, h.APIModelRegister},
		{GET, "/api/models/:id", auth.Viewer, h.APIModelGet},
		{PATCH, "/api/models/:id", auth.Admin, h.APIModelPatch},
		{GET, "/api/models/:id/history", auth.Viewer, h.APIModelHistory},
		{GET, "/api/models/resolve", auth.Viewer, h.APIModelResolve},
		{GET, "/api/models/compare", auth.Viewer, h.APIModelCompare},
		{POST, "/api/models/aliases/fallback", auth.Admin, h.APIModelAliasFallback},
		{POST, "/api/models/:id/deploy", auth.Admin, h.APIModelDeploy},
		{POST, "/api/models/:id/rollback", auth.Admin, h.APIModelRollback},
		{GET, "/api/deployments/:id", auth.Viewer, h.APIDeploymentGet},
		{POST, "/api/serving-targets", auth.Admin, h.APIServingTargetCreate},
		{GET, "/api/serving-targets", auth.Admin, h.APIServingTargetList},

		// Evaluation.
		{GET, "/evaluations", auth.Viewer, h.Evaluations},
		{POST, "/evaluations/golden-sets", auth.Admin, h.GoldenSetMark},
		{POST, "/evaluations/golden-sets/:id/unmark", auth.Admin, h.GoldenSetUnmark},
		{POST, "/evaluations/gate", auth.Admin, h.EvaluationGateSave},
		{POST, "/evaluations/gate/remove", auth.Admin, h.EvaluationGateRemove},
		// The start form posts to the page's address, where a refusal can
		// be reloaded; the older address opens the form.
		{POST, "/evaluations", auth.Admin, h.EvaluationRunStart},
		{POST, "/evaluations/runs", auth.Admin, h.EvaluationRunStart},
		{GET, "/evaluations/runs", auth.Viewer, h.EvaluationRunsOpen},
		{GET, "/evaluations/runs/:id", auth.Viewer, h.EvaluationRun},
		{GET, "/evaluations/runs/:id/live", auth.Viewer, h.EvaluationRunLive},
		{POST, "/evaluations/runs/:id/resume", auth.Admin, h.EvaluationRunResume},
		{GET, "/evaluations/judges", auth.Admin, h.Judges},
		{POST, "/evaluations/judges/endpoints", auth.Admin, h.JudgeEndpointCreate},
		{POST, "/evaluations/judges/templates", auth.Admin, h.JudgeTemplateSave},
		{POST, "/evaluations/judges/test", auth.Admin, h.JudgeTest},
		{POST, "/evaluations/judges/budget", auth.Admin, h.JudgeBudgetSave},
		{GET, "/evaluations/agreement", auth.Viewer, h.AgreementList},
		{POST, "/evaluations/agreement", auth.Admin, h.AgreementStart},
		{GET, "/evaluations/agreement/:id", auth.Viewer, h.Agreement},
		{GET, "/evaluations/agreement/:id/live", auth.Viewer, h.AgreementLive},
		{POST, "/evaluations/agreement/:id/resume", auth.Admin, h.AgreementResume},
		{GET, "/feedback/conflicts", auth.Viewer, h.Conflicts},
		{POST, "/feedback/conflicts/:id", auth.Curator, h.ConflictResolve},
		{GET, "/api/reward-formulas", auth.Viewer, h.APIRewardFormulaList},
		{POST, "/api/reward-formulas", auth.Admin, h.APIRewardFormulaCreate},
		{GET, "/api/endpoints", auth.Admin, h.APIEndpointList},
		{POST, "/api/endpoints", auth.Admin, h.APIEndpointCreate},
		{POST, "/api/evaluations", auth.Admin, h.APIEvaluationStart},
		{POST, "/api/golden-sets", auth.Admin, h.APIGoldenSetCreate},
		{GET, "/api/golden-sets", auth.Viewer, h.APIGoldenSetList},
		{http.MethodDelete, "/api/golden-sets/:id", auth.Admin, h.APIGoldenSetDelete},
		{GET, "/api/evaluations/:id", auth.Viewer, h.APIEvaluationGet},
		{POST, "/api/best-of-n", auth.Curator, h.APIBestOfN},
		{POST, "/api/stats/analyze", auth.Viewer, h.APIStatsAnalyze},
		{POST, "/api/stats/agreement", auth.Viewer, h.APIStatsAgreement},

		// Codebooks.
		{GET, "/codebooks", auth.Viewer, h.CodebookList},
		{GET, "/codebooks/:name", auth.Viewer, h.Codebook},
		{POST, "/codebooks/:name/rules", auth.Curator, h.CodebookRuleAdd},
		{POST, "/codebooks/:name/publish", auth.Admin, h.CodebookPublish},
		{POST, "/codebooks/:name/budget", auth.Curator, h.CodebookBudgetSave},
		{GET, "/codebooks/:name/rules/:id", auth.Viewer, h.CodebookRule},
		{POST, "/codebooks/:name/rules/:id", auth.Curator, h.CodebookRuleSave},
		{GET, "/codebooks/:name/versions/:version", auth.Viewer, h.CodebookVersion},
		{GET, "/codebooks/:name/suggestions", auth.Viewer, h.CodebookSuggestions},
		{POST, "/codebooks/:name/suggestions", auth.Curator, h.CodebookSuggest},
		{POST, "/codebooks/:name/suggestions/:id/dismiss", auth.Curator, h.CodebookSuggestionDismiss},
		{POST, "/api/codebooks/:name/rules", auth.Curator, h.APICodebookRuleCreate},
		{GET, "/api/codebooks/:name/rules", auth.Viewer, h.APICodebookRuleList},
		{PATCH, "/api/codebooks/:name/rules/:id", auth.Curator, h.APICodebookRulePatch},
		{POST, "/api/codebooks/:name/publish", auth.Admin, h.APICodebookPublish},
		{POST, "/api/codebooks/:name/suggestions", auth.Curator, h.APICodebookSuggest},
		{GET, "/api/codebooks/:name/suggestions", auth.Viewer, h.APICodebookSuggestionList},
		{GET, "/api/codebooks/:name", auth.Viewer, h.APICodebookGet},
		{POST, "/api/codebooks/:name/retrieve", auth.Viewer, h.APICodebookRetrieve},
		{GET, "/api/codebooks/:name/export", auth.Viewer, h.APICodebookExport},
		{POST, "/api/codebooks/:name/import", auth.Admin, h.APICodebookImport},

		// A/B experiments.
		{GET, "/experiments", auth.Viewer, h.ExperimentList},
		{GET, "/experiments/new", auth.Admin, h.ExperimentNew},
		{POST, "/experiments", auth.Admin, h.ExperimentCreate},
		{GET, "/experiments/:key", auth.Viewer, h.ExperimentPanel},
		{POST, "/experiments/:key/start", auth.Admin, h.ExperimentStart},
		{POST, "/experiments/:key/pause", auth.Admin, h.ExperimentPause},
		{POST, "/experiments/:key/end", auth.Admin, h.ExperimentEnd},
		{POST, "/experiments/:key/extend", auth.Admin, h.ExperimentExtend},
		{POST, "/experiments/:key/deploy", auth.Admin, h.ExperimentDeploy},
		{POST, "/experiments/:key/traffic", auth.Admin, h.ExperimentTraffic},
		{POST, "/api/models/ab-test", auth.Admin, h.APIExperimentCreate},
		{GET, "/api/experiments", auth.Viewer, h.APIExperimentList},
		{GET, "/api/experiments/:key", auth.Viewer, h.APIExperimentGet},
		{PATCH, "/api/experiments/:key", auth.Admin, h.APIExperimentPatch},
		{POST, "/api/experiments/:key/start", auth.Admin, h.APIExperimentStart},
		{POST, "/api/experiments/:key/pause", auth.Admin, h.APIExperimentPause},
		{POST, "/api/experiments/:key/end", auth.Admin, h.APIExperimentEnd},
		{POST, "/api/experiments/:key/extend", auth.Admin, h.APIExperimentExtend},
		{POST, "/api/experiments/:key/deploy", auth.Admin, h.APIExperimentDeploy},
		{POST, "/api/experiments/:key/assign", auth.Curator, h.APIExperimentAssign},
		{POST, "/api/experiments/:key/assign-batch", auth.Curator, h.APIExperimentAssignBatch},
		{GET, "/api/experiments/:key/config", auth.Viewer, h.APIExperimentConfig},
		{POST, "/api/experiments/:key/exposures", auth.Curator, h.APIExperimentExposures},
		{GET, "/api/experiments/:key/results", auth.Viewer, h.APIExperimentResults},
		{http.MethodPut, "/api/experiments/:key/analysis", auth.Admin, h.APIExperimentAnalysis},
		{POST, "/experiments/settings", auth.Admin, h.ExperimentSettingsSave},
		{GET, "/api/settings/experiments", auth.Viewer, h.APIExperimentSettings},
		{http.MethodPut, "/api/settings/experiments", auth.Admin, h.APIExperimentSettingsSave},
		{GET, "/api/settings/retention", auth.Viewer, h.APIRetentionSettings},
		{http.MethodPut, "/api/settings/retention", auth.Admin, h.APIRetentionSettingsSave},
		{GET, "/api/live-scorers", auth.Viewer, h.APILiveScorerList},
		{http.MethodPut, "/api/live-scorers", auth.Admin, h.APILiveScorerSet},
		{POST, "/experiments/:key/live-scorer", auth.Admin, h.ExperimentLiveScorer},
		{POST, "/experiments/:key/analysis", auth.Admin, h.ExperimentAnalysis},
		{GET, "/monitors", auth.Viewer, h.MonitorList},
		{GET, "/api/monitors", auth.Viewer, h.APIMonitorList},
		{GET, "/api/monitors/settings", auth.Viewer, h.APIMonitorSettings},
		{http.MethodPut, "/api/monitors/settings", auth.Admin, h.APIMonitorSettingsSave},
		{GET, "/api/best-of-n/:id", auth.Viewer, h.APIBestOfNGet},

		// Seed 003 training API.
		{POST, "/api/train", auth.Admin, h.APITrain},
		{GET, "/api/train/status/:id", auth.Viewer, h.APITrainStatus},
		{GET, "/api/train/:id/metrics", auth.Viewer, h.APITrainMetrics},
		{POST, "/api/train/:id/rewards", auth.Curator, h.APITrainRewards},

		// Loops: the loop by itself, data hygiene and routing.
		{GET, "/loops", auth.Viewer, h.LoopList},
		{GET, "/loops/new", auth.Admin, h.LoopNew},
		{POST, "/loops", auth.Admin, h.LoopCreate},
		{GET, "/loops/runs/:id", auth.Viewer, h.LoopRun},
		{POST, "/loops/runs/:id/approve", auth.Admin, h.LoopRunApprove},
		{POST, "/loops/runs/:id/stop", auth.Admin, h.LoopRunStop},
		{GET, "/loops/:id", auth.Viewer, h.Loop},
		{GET, "/loops/:id/edit", auth.Admin, h.LoopEdit},
		{POST, "/loops/:id", auth.Admin, h.LoopUpdate},
		{POST, "/loops/:id/run", auth.Admin, h.LoopRunNow},
		{POST, "/loops/:id/status", auth.Admin, h.LoopStatus},
		{POST, "/api/loops", auth.Admin, h.APILoopCreate},
		{GET, "/api/loops", auth.Viewer, h.APILoopList},
		{GET, "/api/loops/:id", auth.Viewer, h.APILoopGet},
		{PATCH, "/api/loops/:id", auth.Admin, h.APILoopPatch},
		{POST, "/api/loops/:id/run", auth.Admin, h.APILoopRun},
		{GET, "/api/loops/:id/runs", auth.Viewer, h.APILoopRuns},
		{GET, "/api/loop-runs/:id", auth.Viewer, h.APILoopRunGet},
		{POST, "/api/loop-runs/:id/approve", auth.Admin, h.APILoopRunApprove},
		{POST, "/api/loop-runs/:id/stop", auth.Admin, h.APILoopRunStop},
		{POST, "/api/feedback/:id/training-data", auth.Curator, h.APIFeedbackTrainingData},
		{POST, "/feedback/:id/training-data", auth.Curator, h.FeedbackTrainingData},
		{GET, "/feedback/routing", auth.Viewer, h.RoutingPage},
		{POST, "/feedback/routing/rules", auth.Admin, h.RoutingRuleCreate},
		{POST, "/feedback/routing/rules/:id/active", auth.Admin, h.RoutingRuleActive},
		{POST, "/feedback/routing/teams", auth.Admin, h.RoutingTeamCreate},
		{POST, "/feedback/routing/run", auth.Admin, h.RoutingRun},

		// Administration.
		{GET, "/admin/users", auth.Admin, h.Users},
		{POST, "/admin/users", auth.Admin, h.UserCreate},
		{POST, "/admin/users/:id/role", auth.Admin, h.UserRole},
		{POST, "/admin/users/:id/active", auth.Admin, h.UserActive},
		{GET, "/admin/api-keys", auth.Admin, h.APIKeys},
		{POST, "/admin/api-keys", auth.Admin, h.APIKeyCreate},
		{POST, "/admin/api-keys/:id/revoke", auth.Admin, h.APIKeyRevoke},
		{GET, "/admin/audit", auth.Admin, h.Audit},

		// JSON API: API keys or a session.
		{GET, "/api/me", auth.Viewer, h.APIMe},

		// Feedback API.
		{POST, "/api/feedback", auth.Curator, h.APIFeedbackCreate},
		{POST, "/api/feedback/batch", auth.Curator, h.APIFeedbackBatch},
		{GET, "/api/feedback", auth.Viewer, h.APIFeedbackList},
		{GET, "/api/feedback/:id", auth.Viewer, h.APIFeedbackGet},
		{PATCH, "/api/feedback/:id", auth.Curator, h.APIFeedbackPatch},

		// Overlapping review: plans, each reviewer's label (blind until
		// their own is in), adjudication (admins and named adjudicators,
		// checked by the service) and agreement between reviewers.
		{GET, "/review", auth.Viewer, h.ReviewHome},
		{POST, "/review/plans", auth.Admin, h.ReviewPlanCreate},
		{POST, "/review/plans/:id/end", auth.Admin, h.ReviewPlanEnd},
		{POST, "/review/plans/:id/next", auth.Curator, h.ReviewNext},
		{POST, "/review/adjudicators", auth.Admin, h.ReviewAdjudicatorAdd},
		{POST, "/review/adjudicators/:id/remove", auth.Admin, h.ReviewAdjudicatorRemove},
		{GET, "/review/adjudication", auth.Curator, h.Adjudication},
		{POST, "/review/adjudication/:id", auth.Curator, h.AdjudicationDecide},
		{GET, "/review/agreement", auth.Viewer, h.ReviewAgreement},
		{POST, "/feedback/:id/review", auth.Curator, h.FeedbackReviewSubmit},
		{POST, "/feedback/:id/review/release", auth.Curator, h.FeedbackReviewRelease},
		{GET, "/api/review/plans", auth.Viewer, h.APIReviewPlanList},
		{POST, "/api/review/plans", auth.Admin, h.APIReviewPlanCreate},
		{POST, "/api/review/plans/:id/next", auth.Curator, h.APIReviewNext},
		{GET, "/api/feedback/:id/reviews", auth.Viewer, h.APIFeedbackReviews},
		{POST, "/api/feedback/:id/reviews", auth.Curator, h.APIFeedbackReviewCreate},
		{POST, "/api/feedback/:id/adjudication", auth.Curator, h.APIFeedbackAdjudicate},
		{GET, "/api/agreement", auth.Viewer, h.APIAgreement},

		// Review rubrics: admins define and edit them (each edit a new
		// version); curators answer them beside the item.
		{GET, "/rubrics", auth.Viewer, h.RubricList},
		{GET, "/rubrics/new", auth.Admin, h.RubricNew},
		{POST, "/rubrics", auth.Admin, h.RubricCreate},
		{GET, "/rubrics/:id", auth.Viewer, h.RubricEdit},
		{GET, "/rubrics/:id/items", auth.Viewer, h.RubricItems},
		{POST, "/rubrics/:id", auth.Admin, h.RubricSave},
		{POST, "/feedback/:id/answers", auth.Curator, h.FeedbackAnswersSave},
		{GET, "/api/rubrics", auth.Viewer, h.APIRubricList},
		{POST, "/api/rubrics", auth.Admin, h.APIRubricCreate},
		{GET, "/api/rubrics/:id", auth.Viewer, h.APIRubricGet},
		{GET, "/api/rubrics/:id/export", auth.Curator, h.APIRubricExport},
		{POST, "/api/rubrics/:id/answers", auth.Curator, h.APIRubricAnswersBulk},
		{POST, "/api/rubrics/:id/judge", auth.Curator, h.APIRubricJudge},
		{PATCH, "/api/rubrics/:id", auth.Admin, h.APIRubricUpdate},
		{GET, "/api/feedback/:id/answers", auth.Viewer, h.APIFeedbackAnswerList},
		{POST, "/api/feedback/:id/answers", auth.Curator, h.APIFeedbackAnswersCreate},
		// Shadow deployments: a candidate answers a share of an alias's
		// queries in the background, both answers scored and paired.
		{GET, "/shadows", auth.Viewer, h.ShadowList},
		{GET, "/shadows/:id", auth.Viewer, h.ShadowDetail},
		{POST, "/shadows/:id/stop", auth.Admin, h.ShadowStop},
		{POST, "/api/models/:id/shadow", auth.Admin, h.APIShadowCreate},
		{GET, "/api/shadows", auth.Viewer, h.APIShadowList},
		{GET, "/api/shadows/:id", auth.Viewer, h.APIShadowGet},
		{POST, "/api/shadows/:id/stop", auth.Admin, h.APIShadowStop},
	}
}
