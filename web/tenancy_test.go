package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/handlers"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/routing"
	"github.com/curate/curate/internal/serving/vllmtest"
	"github.com/curate/curate/web"
	"github.com/curate/curate/web/webtest"
)

// victim holds one of every kind of object the routes name, all in one
// organisation, by the route parameter that names them.
type victim struct {
	ids map[string]string // kind → id
	org uuid.UUID
}

// newVictim fills the organisation "globex" with one object of each kind:
// through the API where it makes them on a server without workers, and
// through the database's own insert statements for what only a job makes
// (alerts, import runs, fine-tuning jobs, evaluation and agreement runs,
// conflicts, suggestions, best-of-N answers).
func newVictim(t *testing.T, s *webtest.Server) victim {
	t.Helper()
	ctx := context.Background()
	org := s.Org("globex")
	key := s.APIKey(org, "globex-ops", "admin")
	v := victim{ids: map[string]string{}, org: org}
	post := func(path string, body map[string]any, status int) map[string]any {
		var out map[string]any
		s.API(key, http.MethodPost, path, body).Must(t, status).JSON(t, &out)
		return out
	}
	id := func(m map[string]any) string { return m["id"].(string) }

	v.ids["feedback"] = id(post("/api/feedback", map[string]any{"query": "What is our refund window?", "response": "30 days.",
		"feedback_type": "correction", "correction": "14 days from purchase."}, http.StatusCreated))
	v.ids["pair"] = id(post("/api/preference-pairs", map[string]any{"query": "Refund window?", "chosen_response": "14 days from purchase.",
		"rejected_response": "30 days."}, http.StatusCreated))
	dataset := id(post("/api/training-datasets", map[string]any{"name": "globex-dpo", "dataset_type": "dpo"}, http.StatusCreated))
	v.ids["dataset"] = dataset
	s.API(key, http.MethodPost, "/api/training-datasets/"+dataset+"/members", map[string]any{"add": []string{v.ids["pair"]}}).Must(t, http.StatusOK)
	var detail struct {
		Current struct {
			ID string `json:"id"`
		} `json:"current_version"`
	}
	s.API(key, http.MethodPatch, "/api/training-datasets/"+dataset, map[string]any{"status": "ready"}).Must(t, http.StatusOK).JSON(t, &detail)
	v.ids["version"] = detail.Current.ID
	v.ids["export"] = id(post("/api/training-datasets/"+dataset+"/export", map[string]any{"format": "trl_preference"}, http.StatusAccepted))

	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	post("/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}, http.StatusCreated)
	var versions []string
	for i := range 2 {
		versions = append(versions, id(post("/api/models", map[string]any{"name": "support", "model_id": fmt.Sprintf("/adapters/support-%d", i+1),
			"base_model": "meta-llama/Llama-3.1-8B-Instruct", "kind": "lora"}, http.StatusCreated)))
	}
	v.ids["model_version"] = versions[0]
	v.ids["deployment"] = id(post("/api/models/"+versions[0]+"/deploy", map[string]any{"alias": "production", "target": "gpu-1", "reason": "now"},
		http.StatusAccepted))
	post("/api/models/ab-test", map[string]any{"key": "globex-exp", "control_model_id": versions[0], "treatment_model_id": versions[1]},
		http.StatusCreated)
	v.ids["experiment"] = "globex-exp"

	post("/api/codebooks/support/rules", map[string]any{"section": "billing", "content": "Refunds: 14 days from purchase.", "status": "active"},
		http.StatusCreated)
	s.API(key, http.MethodPost, "/api/codebooks/support/publish", nil).Must(t, http.StatusCreated)
	v.ids["rule"] = id(post("/api/codebooks/private-book/rules", map[string]any{"section": "x", "content": "A private rule.", "status": "active"},
		http.StatusCreated))
	v.ids["codebook"] = "private-book"
	v.ids["review_plan"] = id(post("/api/review/plans", map[string]any{"name": "double-check", "tag": "billing", "overlap": 2}, http.StatusCreated))
	v.ids["rubric"] = id(post("/api/rubrics", ownRubric, http.StatusCreated))

	user, err := s.App.Accounts.CreateUser(ctx, audit.System, org, accounts.NewUser{Email: "gus@globex.test", Role: "curator", Password: webtest.Password})
	if err != nil {
		t.Fatal(err)
	}
	v.ids["user"] = user.ID.String()
	apiKey, _, err := s.App.Accounts.CreateAPIKey(ctx, audit.System, org, accounts.NewKey{Name: "globex-assistant", Role: "curator"})
	if err != nil {
		t.Fatal(err)
	}
	v.ids["api_key"] = apiKey.ID.String()

	q := db.New(s.Pool)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	version, feedback := uuid.MustParse(v.ids["version"]), uuid.MustParse(v.ids["feedback"])
	alert, err := q.AlertInsert(ctx, db.AlertInsertParams{OrgID: org, Kind: "low_rating", Severity: "warn", DedupKey: "k", Title: "Ratings fell",
		Message: "Ratings fell.", Details: json.RawMessage(`{}`), Now: time.Now()})
	must(err)
	v.ids["alert"] = alert.ID.String()
	run, err := q.ImportRunInsert(ctx, db.ImportRunInsertParams{ID: uuid.New(), OrgID: org, Kind: "jsonl", FileName: "f.jsonl", FileSize: 1})
	must(err)
	v.ids["import_run"] = run.ID.String()
	job, err := q.FineTuneJobInsert(ctx, db.FineTuneJobInsertParams{OrgID: org, DatasetVersionID: version, DatasetLabel: "globex-dpo v1",
		DatasetKind: "preference", Provider: "local", BaseModel: "tiny", Method: "dpo", ExportFormat: "trl_preference",
		Hyperparameters: json.RawMessage(`{}`), LocalSettings: json.RawMessage(`{}`), Name: "globex-dpo v1 · ft-1"})
	must(err)
	v.ids["finetune_job"] = job.ID.String()
	_, err = q.GoldenSetInsertOrUpdate(ctx, db.GoldenSetInsertOrUpdateParams{VersionID: version, OrgID: org, Name: "golden", SplitTags: []string{}})
	must(err)
	v.ids["golden_set"] = version.String()
	eval, err := q.EvaluationRunInsert(ctx, db.EvaluationRunInsertParams{OrgID: org, Kind: "quality", GoldenSetVersionID: version,
		CandidateVersionID: uuid.NullUUID{UUID: uuid.MustParse(versions[0]), Valid: true}, Config: json.RawMessage(`{}`), Total: 1})
	must(err)
	v.ids["evaluation"] = eval.ID.String()
	agreement, err := q.JudgeAgreementInsert(ctx, db.JudgeAgreementInsertParams{OrgID: org, Endpoint: "judge", Template: "default",
		TemplateVersion: 1, Threshold: 0.3, ItemLimit: 10, Total: 1})
	must(err)
	v.ids["agreement"] = agreement.ID.String()
	must(q.JudgeConflictInsert(ctx, db.JudgeConflictInsertParams{OrgID: org, AgreementID: agreement.ID, FeedbackID: feedback, HumanScore: 1, JudgeScore: 0}))
	var conflict uuid.UUID
	must(s.Pool.QueryRow(ctx, `SELECT id FROM judge_conflicts WHERE agreement_id = $1`, agreement.ID).Scan(&conflict))
	v.ids["conflict"] = conflict.String()
	book, err := q.CodebookGetByName(ctx, db.CodebookGetByNameParams{OrgID: org, Name: "support"})
	must(err)
	suggestions, err := q.CodebookSuggestionInsertMany(ctx, db.CodebookSuggestionInsertManyParams{OrgID: org, CodebookID: book.ID, Endpoint: "judge",
		TemplateVersion: 1, FeedbackIds: []uuid.UUID{feedback}, RowLimit: 1})
	must(err)
	must(s.Pool.QueryRow(ctx, `UPDATE codebook_suggestions SET status = 'ready' WHERE org_id = $1 RETURNING id`, org).Scan(new(uuid.UUID)))
	v.ids["suggestion"] = suggestions[0].String()
	selection, err := q.SelectionInsert(ctx, db.SelectionInsertParams{OrgID: org, Query: "q", Context: json.RawMessage(`[]`), Scorer: json.RawMessage(`{}`),
		Selection: "best", GenerationMethod: "sampling", Candidates: json.RawMessage(`[]`)})
	must(err)
	v.ids["selection"] = selection.ID.String()
	loop, err := q.LoopInsert(ctx, db.LoopInsertParams{OrgID: org, Name: "globex-weekly", RegisteredModel: "support", Spec: json.RawMessage(`{}`),
		MinNewItems: 1000, CreatedByLabel: "globex-ops"})
	must(err)
	v.ids["loop"] = loop.ID.String()
	loopRun, err := q.LoopRunInsert(ctx, db.LoopRunInsertParams{OrgID: org, LoopID: loop.ID, StartedBy: "person", StartedByLabel: "globex-ops",
		Spec: json.RawMessage(`{}`), Step: "collect"})
	must(err)
	v.ids["loop_run"] = loopRun.ID.String()
	routed, err := s.App.Routing.CreateRule(ctx, audit.System, org, routing.NewRule{Name: "thumbs down", Filter: url.Values{"type": {"thumbs_down"}},
		Mode: routing.RoundRobin, Curators: []routing.Curator{{UserID: user.ID}}, Cap: 10})
	must(err)
	v.ids["routing_rule"] = routed.ID.String()
	var shadowID uuid.UUID
	must(s.Pool.QueryRow(ctx, `INSERT INTO shadows (org_id, registered_model_id, alias, candidate_version_id, sample, config)
		SELECT $1, registered_model_id, 'production', id, 0.5, '{}' FROM model_versions WHERE id = $2 RETURNING id`, org, versions[1]).Scan(&shadowID))
	v.ids["shadow"] = shadowID.String()
	return v
}

// paramKinds says which kind of object each route parameter names, by the
// route's path up to and including it.
var paramKinds = []struct{ prefix, kind string }{
	{"/feedback/conflicts/:id", "conflict"},
	{"/feedback/:id", "feedback"},
	{"/api/feedback/:id", "feedback"},
	{"/alerts/:id", "alert"},
	{"/imports/runs/:id", "import_run"},
	{"/pairs/:id", "pair"},
	{"/api/preference-pairs/:id", "pair"},
	{"/datasets/:id", "dataset"},
	{"/api/training-datasets/:id", "dataset"},
	{"/fine-tuning/jobs/:id", "finetune_job"},
	{"/api/fine-tuning/jobs/:id", "finetune_job"},
	{"/api/train/status/:id", "finetune_job"},
	{"/api/train/:id", "finetune_job"},
	{"/models/versions/:id", "model_version"},
	{"/api/models/:id", "model_version"},
	{"/api/deployments/:id", "deployment"},
	{"/evaluations/golden-sets/:id", "golden_set"},
	{"/api/golden-sets/:id", "golden_set"},
	{"/evaluations/runs/:id", "evaluation"},
	{"/api/evaluations/:id", "evaluation"},
	{"/evaluations/agreement/:id", "agreement"},
	{"/admin/users/:id", "user"},
	{"/admin/api-keys/:id", "api_key"},
	{"/api/best-of-n/:id", "selection"},
	{"/codebooks/:name/rules/:id", "rule"},
	{"/api/codebooks/:name/rules/:id", "rule"},
	{"/codebooks/:name/suggestions/:id", "suggestion"},
	{"/experiments/:key", "experiment"},
	{"/api/experiments/:key", "experiment"},
	{"/review/plans/:id", "review_plan"},
	{"/api/review/plans/:id", "review_plan"},
	{"/review/adjudicators/:id", "user"},
	{"/review/adjudication/:id", "feedback"},
	{"/loops/runs/:id", "loop_run"},
	{"/loops/:id", "loop"},
	{"/api/loops/:id", "loop"},
	{"/api/loop-runs/:id", "loop_run"},
	{"/feedback/routing/rules/:id", "routing_rule"},
	{"/rubrics/:id", "rubric"},
	{"/api/rubrics/:id", "rubric"},
	{"/shadows/:id", "shadow"},
	{"/api/shadows/:id", "shadow"},
}

var paramRE = regexp.MustCompile(`:[a-z]+`)

// foreignPath fills a route's parameters with the victim's ids. A codebook
// named alone is the victim's own codebook's name, which the caller has
// none of; beside a rule or suggestion id it is the caller's own
// codebook of the victim's name ("support"), so only the id is foreign; a
// codebook version is the victim's, under that shared name; an export file
// is the manifest. ok is false for a parameter no kind is known for.
func foreignPath(path string, v victim) (string, bool) {
	if !strings.Contains(path, ":") {
		return path, true
	}
	out, ok := path, true
	named := strings.Contains(path, "/rules/:id") || strings.Contains(path, "/suggestions/:id") || strings.Contains(path, "/versions/:version")
	for _, p := range paramRE.FindAllString(path, -1) {
		var value string
		switch p {
		case ":eid":
			value = v.ids["export"]
		case ":version":
			value = "1"
		case ":name":
			switch {
			case strings.Contains(path, "/files/:name"):
				value = "manifest.json"
			case named:
				value = "support"
			default:
				value = v.ids["codebook"]
			}
		default:
			prefix := path[:strings.Index(path, p)+len(p)]
			for _, pk := range paramKinds {
				if prefix == pk.prefix {
					value = v.ids[pk.kind]
					break
				}
			}
		}
		if value == "" {
			ok = false
			continue
		}
		out = strings.Replace(out, p, value, 1)
	}
	return out, ok
}

// makesOwn are routes that, given a name the caller has no object of,
// make one in the caller's own organisation: a codebook is named, not
// numbered, and each organisation has its own names.
var makesOwn = map[string]bool{
	"POST /codebooks/:name/rules":           true,
	"POST /api/codebooks/:name/rules":       true,
	"POST /api/codebooks/:name/import":      true,
	"POST /codebooks/:name/budget":          true, // sets the caller's own codebook's budget
	"POST /codebooks/:name/suggestions":     true, // asks for suggestions in the caller's own codebook
	"POST /api/codebooks/:name/suggestions": true,
}

// input is what a route is sent besides its path: a valid body, so that
// what answers is the lookup of the id, not a check of the input.
type input struct {
	form    url.Values
	json    map[string]any
	ifMatch string
}

// inputs are the routes that check their input before their id, with
// input that passes; the rest are sent an empty form or JSON object.
func inputs(own ownIDs) map[string]input {
	future := time.Now().Add(48 * time.Hour)
	return map[string]input{
		"POST /feedback/:id/status":               {form: url.Values{"status": {"approved"}, "version": {"1"}}},
		"POST /feedback/:id/tags":                 {form: url.Values{"tags": {"billing"}, "version": {"1"}}},
		"POST /feedback/:id/note":                 {form: url.Values{"note": {"A note."}, "version": {"1"}}},
		"POST /feedback/:id/assign":               {form: url.Values{"assignee": {own.user}, "version": {"1"}}},
		"POST /feedback/:id/auto-advance":         {form: url.Values{"auto_advance": {"on"}}},
		"POST /feedback/:id/diff":                 {form: url.Values{"correction": {"Fourteen days."}}},
		"POST /feedback/:id/correction":           {form: url.Values{"correction": {"Fourteen days."}, "version": {"1"}}},
		"PATCH /api/feedback/:id":                 {json: map[string]any{"status": "approved"}, ifMatch: "1"},
		"POST /pairs/:id":                         {form: url.Values{"query": {"q"}, "chosen_response": {"a"}, "rejected_response": {"b"}, "version": {"1"}}},
		"PATCH /api/preference-pairs/:id":         {json: map[string]any{"query": "q"}, ifMatch: "1"},
		"POST /datasets/:id/members":              {form: url.Values{"ids": {own.pair}}},
		"POST /datasets/:id/members/remove":       {form: url.Values{"ids": {own.pair}}},
		"POST /datasets/:id/status":               {form: url.Values{"status": {"archived"}}},
		"POST /datasets/:id/exports":              {form: url.Values{"format": {"trl_preference"}}},
		"POST /api/training-datasets/:id/members": {json: map[string]any{"add": []string{own.pair}}},
		"POST /api/training-datasets/:id/export":  {json: map[string]any{"format": "trl_preference"}},
		"PATCH /api/training-datasets/:id":        {json: map[string]any{"name": "mine now"}},
		"POST /models/versions/:id/status":        {form: url.Values{"status": {"deprecated"}}},
		"POST /models/versions/:id/deploy":        {form: url.Values{"alias": {"production"}, "target": {"gpu-1"}, "reason": {"r"}}},
		"POST /models/versions/:id/rollback":      {form: url.Values{"alias": {"production"}, "reason": {"r"}}},
		"POST /api/models/:id/deploy":             {json: map[string]any{"alias": "production", "target": "gpu-1", "reason": "r"}},
		"POST /api/models/:id/rollback":           {json: map[string]any{"alias": "production", "reason": "r"}},
		"PATCH /api/models/:id":                   {json: map[string]any{"status": "deprecated"}},
		"POST /feedback/conflicts/:id":            {form: url.Values{"resolution": {"judge_right"}}},
		"PATCH /api/codebooks/:name/rules/:id":    {json: map[string]any{"section": "x", "content": "Mine now.", "status": "active"}, ifMatch: "1"},
		"POST /codebooks/:name/rules/:id":         {form: url.Values{"section": {"x"}, "content": {"Mine now."}, "status": {"active"}, "version": {"1"}}},
		"POST /api/codebooks/:name/suggestions":   {json: map[string]any{"endpoint": "judge", "feedback_ids": []string{own.feedback}}},
		"POST /api/codebooks/:name/retrieve":      {json: map[string]any{"query": "refund"}},
		"POST /experiments/:key/end":              {form: url.Values{"winner": {"control"}}},
		"POST /experiments/:key/extend":           {form: url.Values{"until": {future.Format("2006-01-02")}}},
		"POST /experiments/:key/traffic":          {form: url.Values{"weight_0": {"0.5"}, "weight_1": {"0.5"}}},
		"POST /api/experiments/:key/extend":       {json: map[string]any{"until": future}},
		"POST /api/experiments/:key/assign":       {json: map[string]any{"unit_id": "u-1"}},
		"POST /api/experiments/:key/assign-batch": {json: map[string]any{"unit_ids": []string{"u-1"}}},
		"POST /api/experiments/:key/exposures": {json: map[string]any{"exposures": []map[string]any{
			{"unit_id": "u-1", "arm_index": 0, "at": time.Now().UTC().Format(time.RFC3339)}}}},
		"POST /admin/users/:id/role":               {form: url.Values{"role": {"viewer"}}},
		"POST /admin/users/:id/active":             {form: url.Values{"active": {"false"}}},
		"POST /evaluations/golden-sets/:id/unmark": {form: url.Values{}},
		"POST /review/adjudication/:id":            {form: url.Values{"status": {"approved"}, "note": {"Mine now."}}},
		"POST /api/feedback/:id/reviews":           {json: map[string]any{"status": "approved"}},
		"POST /api/feedback/:id/adjudication":      {json: map[string]any{"status": "approved", "note": "Mine now."}},
		"POST /feedback/:id/review":                {form: url.Values{"status": {"approved"}}},
		"POST /feedback/:id/training-data":         {form: url.Values{"is_training_data": {"false"}}},
		"POST /api/feedback/:id/training-data":     {json: map[string]any{"is_training_data": false}},
		"POST /loops/:id/status":                   {form: url.Values{"status": {"paused"}}},
		"PATCH /api/loops/:id":                     {json: map[string]any{"status": "paused"}},
		"POST /feedback/routing/rules/:id/active":  {form: url.Values{"active": {"0"}}},
		"POST /rubrics/:id":                        {form: url.Values{"name": {"Mine"}, "q0_key": {"urgency"}, "q0_kind": {"label"}, "q0_options": {"none\ncritical"}}},
		"PATCH /api/rubrics/:id":                   {json: ownRubric},
		"POST /feedback/:id/answers":               {form: url.Values{"rubric_id": {own.rubric}, "a.urgency": {"none"}}},
		"POST /api/feedback/:id/answers":           {json: map[string]any{"rubric_id": own.rubric, "answers": map[string]any{"urgency": "none"}}},
		"POST /api/rubrics/:id/answers":            {json: map[string]any{"feedback_ids": []string{own.feedback}, "answers": map[string]any{"urgency": "none"}}},
		"POST /api/rubrics/:id/judge":              {json: map[string]any{"endpoint": "judge", "feedback_ids": []string{own.feedback}}},
		"POST /api/models/:id/shadow":              {json: map[string]any{"alias": "production", "sample": 0.5}},
	}
}

// byPerson are API routes only a person may call (a review is a person's
// label, never an API key's): an API key is refused them whatever the id,
// so they are called with the admin's signed-in session.
var byPerson = map[string]bool{
	"POST /api/review/plans/:id/next": true,
	"POST /api/feedback/:id/reviews":  true,
}

// ownIDs are the caller's own objects that valid input names.
type ownIDs struct{ user, pair, feedback, rubric string }

// ownRubric is a rubric as valid input defines it.
var ownRubric = map[string]any{"name": "Triage", "questions": []map[string]any{{"key": "urgency", "kind": "label", "options": []string{"none", "critical"}}}}

// Another organisation's ids answer 404 on every route that takes an id,
// as if they did not exist, whatever the method, with and without htmx,
// for an admin (who may call every route): the routes table is walked,
// so a new route is checked once its parameter's kind is listed above.
func TestForeignIDsAreNotFound(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	v := newVictim(t, s)
	org := s.Org("acme")
	s.User(org, "ada@acme.test", "admin")
	browser := s.SignedIn("ada@acme.test")
	key := s.APIKey(org, "acme-ops", "admin")
	// The caller's own codebook of the victim's name, without a version,
	// and what valid input names: a user, a pair, a corrected item, a
	// serving target and a judge endpoint of its own.
	s.API(key, http.MethodPost, "/api/codebooks/support/rules", map[string]any{"section": "billing", "content": "Our own rule.", "status": "active"}).
		Must(t, http.StatusCreated)
	own := ownIDs{user: s.User(org, "cy@acme.test", "curator").String()}
	var made struct {
		ID string `json:"id"`
	}
	s.API(key, http.MethodPost, "/api/preference-pairs", map[string]any{"query": "q", "chosen_response": "a", "rejected_response": "b"}).
		Must(t, http.StatusCreated).JSON(t, &made)
	own.pair = made.ID
	s.API(key, http.MethodPost, "/api/feedback", map[string]any{"query": "q", "response": "a", "feedback_type": "correction", "correction": "b"}).
		Must(t, http.StatusCreated).JSON(t, &made)
	own.feedback = made.ID
	s.API(key, http.MethodPost, "/api/rubrics", ownRubric).Must(t, http.StatusCreated).JSON(t, &made)
	own.rubric = made.ID
	vllm := vllmtest.New(t, "meta-llama/Llama-3.1-8B-Instruct")
	s.API(key, http.MethodPost, "/api/serving-targets", map[string]any{"name": "gpu-1", "kind": "vllm", "base_url": vllm.URL}).Must(t, http.StatusCreated)
	s.API(key, http.MethodPost, "/api/endpoints", map[string]any{"name": "judge", "base_url": vllm.URL + "/v1", "model": "m"}).Must(t, http.StatusCreated)
	sent := inputs(own)

	before := v.snapshot(t, s)
	checked := 0
	for _, r := range web.Routes(&handlers.Handlers{}) {
		if !strings.Contains(r.Path, ":") || makesOwn[r.Method+" "+r.Path] {
			continue
		}
		path, ok := foreignPath(r.Path, v)
		if !ok {
			t.Errorf("%s %s: no foreign id for its parameters; add its kind to paramKinds", r.Method, r.Path)
			continue
		}
		checked++
		in := sent[r.Method+" "+r.Path]
		if strings.HasPrefix(r.Path, "/api/") {
			h := http.Header{"Authorization": {"Bearer " + key}}
			client := s.Client()
			if byPerson[r.Method+" "+r.Path] {
				h = http.Header{"X-CSRF-Token": {browser.CSRF()}}
				client = browser
			}
			var body *strings.Reader
			if r.Method != http.MethodGet && r.Method != http.MethodDelete {
				if in.json == nil {
					in.json = map[string]any{}
				}
				body = strings.NewReader(mustJSON(t, in.json))
				h.Set("Content-Type", "application/json")
			}
			if in.ifMatch != "" {
				h.Set("If-Match", in.ifMatch)
			}
			var res webtest.Response
			if body == nil {
				res = client.Do(r.Method, path, nil, h)
			} else {
				res = client.Do(r.Method, path, body, h)
			}
			if res.Status != http.StatusNotFound {
				t.Errorf("%s %s: %d, want 404: %.200s", r.Method, path, res.Status, res.Body)
			}
			continue
		}
		if r.Method == http.MethodGet {
			if res := browser.Get(path); res.Status != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", path, res.Status)
			}
			continue
		}
		for _, htmx := range []bool{false, true} {
			form := url.Values{"_csrf": {browser.CSRF()}}
			for k, vs := range in.form {
				form[k] = vs
			}
			h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			if htmx {
				h.Set("HX-Request", "true")
			}
			res := browser.Do(r.Method, path, strings.NewReader(form.Encode()), h)
			if res.Status != http.StatusNotFound {
				t.Errorf("%s %s (htmx %v): %d, want 404: %.300s", r.Method, path, htmx, res.Status, res.Body)
			}
			browser.Get("/") // a fresh CSRF token
		}
	}
	if checked < 80 {
		t.Errorf("checked %d routes; the table has more that take ids", checked)
	}
	after := v.snapshot(t, s)
	for table, sum := range before {
		if after[table] != sum {
			t.Errorf("the victim's %s changed", table)
		}
	}
}

// victimTables are the tables whose rows of the victim's the routes could
// change.
var victimTables = []string{"feedback", "preference_pairs", "training_datasets", "training_dataset_members", "dataset_versions",
	"dataset_exports", "fine_tuning_jobs", "registered_models", "model_versions", "model_aliases", "deployments", "golden_sets",
	"evaluation_runs", "judge_agreements", "judge_conflicts", "codebooks", "codebook_rules", "codebook_versions", "codebook_suggestions",
	"experiments", "alerts", "import_runs", "users", "api_keys", "best_of_n_responses", "user_preferences", "review_plans", "review_labels",
	"review_items", "loop_policies", "loop_runs", "routing_rules", "shadows"}

// snapshot digests the victim's rows of each table.
func (v victim) snapshot(t *testing.T, s *webtest.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range victimTables {
		var sum string
		err := s.Pool.QueryRow(context.Background(),
			`SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM `+table+` t WHERE org_id = $1`, v.org).Scan(&sum)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = sum
	}
	return out
}
