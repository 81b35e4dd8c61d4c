package openaitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/curate/curate/internal/provider"
)

type job struct {
	id, model, trainingFile, validationFile, suffix string
	createdAt                                       int64
	finishedAt                                      int64
	seed                                            int64
	metadata                                        map[string]string
	method                                          string
	hyper                                           map[string]any // resolved hyperparameters
	script                                          Script
	request                                         []byte // the create body as sent

	status         string
	polls          int // fetches so far
	shown          int // training steps revealed so far
	fineTunedModel string
	resultFiles    []string
	errMessage     string
	trainedTokens  int64
	events         []map[string]any // oldest first
	checkpoints    []map[string]any // oldest first
}

func (j *job) view() map[string]any {
	v := map[string]any{
		"id": j.id, "object": "fine_tuning.job", "created_at": j.createdAt,
		"error": nil, "fine_tuned_model": nullable(j.fineTunedModel), "finished_at": nil,
		"hyperparameters": j.hyper, "model": j.model, "organization_id": "org-curate-fake",
		"result_files": append([]string{}, j.resultFiles...), "seed": j.seed, "status": j.status,
		"trained_tokens": nil, "training_file": j.trainingFile, "validation_file": nullable(j.validationFile),
		"estimated_finish": nil, "integrations": []any{}, "metadata": j.metadata,
		"method": map[string]any{"type": j.method, j.method: map[string]any{"hyperparameters": j.hyper}},
	}
	if j.finishedAt != 0 {
		v["finished_at"] = j.finishedAt
	}
	if j.status == "succeeded" {
		v["trained_tokens"] = j.trainedTokens
	}
	if j.status == "failed" {
		v["error"] = map[string]any{"code": "job_failed", "message": j.errMessage, "param": nil}
	}
	return v
}

// createRequest is the part of the create body the fake reads.
type createRequest struct {
	Model          string            `json:"model"`
	TrainingFile   string            `json:"training_file"`
	ValidationFile string            `json:"validation_file"`
	Suffix         string            `json:"suffix"`
	Seed           *int64            `json:"seed"`
	Metadata       map[string]string `json:"metadata"`
	Method         struct {
		Type       string `json:"type"`
		Supervised struct {
			Hyperparameters map[string]any `json:"hyperparameters"`
		} `json:"supervised"`
		Dpo struct {
			Hyperparameters map[string]any `json:"hyperparameters"`
		} `json:"dpo"`
	} `json:"method"`
}

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Could not read the request body.", "", "")
		return
	}
	var req createRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "", "")
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "Missing required parameter: 'model'.", "model", "")
		return
	}
	if req.Method.Type == "" {
		req.Method.Type = "supervised"
	}
	if req.Method.Type != "supervised" && req.Method.Type != "dpo" {
		writeError(w, http.StatusBadRequest, "Invalid value for 'method.type'.", "method.type", "")
		return
	}

	s.mu.Lock()
	for _, f := range []struct{ param, id string }{{"training_file", req.TrainingFile}, {"validation_file", req.ValidationFile}} {
		if f.id == "" && f.param == "validation_file" {
			continue
		}
		if file, ok := s.files[f.id]; !ok || file.purpose != "fine-tune" {
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid %s: %s", f.param, f.id), f.param, "invalid_"+f.param)
			return
		}
	}

	n := s.next()
	j := &job{
		id: idOf("ftjob", n), model: req.Model, trainingFile: req.TrainingFile, validationFile: req.ValidationFile,
		suffix: req.Suffix, createdAt: s.stamp(), seed: int64(n), metadata: req.Metadata,
		method: req.Method.Type, script: s.script, status: "validating_files", request: body,
	}
	if req.Seed != nil {
		j.seed = *req.Seed
	}
	asked := req.Method.Supervised.Hyperparameters
	if j.method == "dpo" {
		asked = req.Method.Dpo.Hyperparameters
	}
	j.hyper = resolve(asked, j.method, s.autoEpochs(req.Model, req.TrainingFile))
	j.event(s, "info", "message", "Created fine-tuning job: "+j.id, nil)
	j.event(s, "info", "message", "Validating training file: "+j.trainingFile, nil)
	s.jobs[j.id] = j
	s.jobOrder = append(s.jobOrder, j.id)
	s.jobsCreated++
	view, after := j.view(), s.AfterCreate
	s.mu.Unlock()
	if after != nil {
		after(j.id)
	}
	writeJSON(w, http.StatusOK, view)
}

// resolve replaces "auto" or missing hyperparameters by the values the job
// runs with, as OpenAI reports them once resolved.
func resolve(asked map[string]any, method string, epochs int) map[string]any {
	out := map[string]any{"n_epochs": epochs, "batch_size": 1, "learning_rate_multiplier": 2.0}
	if method == "dpo" {
		out["beta"] = 0.1
	}
	for k, v := range asked {
		if _, isNumber := v.(float64); isNumber {
			out[k] = v
		}
	}
	return out
}

// event appends a job event. The caller holds s.mu.
func (j *job) event(s *Server, level, typ, message string, data map[string]any) {
	n := s.next()
	j.events = append(j.events, map[string]any{
		"object": "fine_tuning.job.event", "id": idOf("ftevent", n), "created_at": s.stamp(),
		"level": level, "message": message, "data": data, "type": typ,
	})
}

// advance moves the job one fetch further along its script. The caller
// holds s.mu.
func (j *job) advance(s *Server) {
	if j.status == "succeeded" || j.status == "failed" || j.status == "cancelled" {
		return
	}
	j.polls++
	sc := j.script
	switch {
	case j.polls <= sc.ValidatingPolls:
		return
	case j.polls <= sc.ValidatingPolls+sc.QueuedPolls:
		if j.status != "queued" {
			j.status = "queued"
			j.event(s, "info", "message", "Files validated, moving job to queued state", nil)
		}
		return
	}
	if j.status != "running" {
		j.status = "running"
		j.event(s, "info", "message", "Fine-tuning job started", nil)
	}
	total := len(sc.Metrics)
	target := min(j.shown+max(sc.StepsPerPoll, 1), total)
	if sc.FailAtStep > 0 {
		target = min(target, sc.FailAtStep)
	}
	epochs := int(toFloat(j.hyper["n_epochs"]))
	for j.shown < target {
		m := sc.Metrics[j.shown]
		j.shown++
		j.event(s, "info", "metrics", stepMessage(m, total), metricsData(m, total))
		if epochs > 1 && total >= epochs && j.shown%(total/epochs) == 0 && j.shown < total {
			j.checkpoint(s, m)
		}
	}
	switch {
	case sc.FailAtStep > 0 && j.shown >= sc.FailAtStep:
		j.status, j.errMessage, j.finishedAt = "failed", sc.FailMessage, s.stamp()
		j.event(s, "error", "message", sc.FailMessage, nil)
	case j.shown >= total:
		j.succeed(s)
	}
}

func (j *job) checkpoint(s *Server, m provider.StepMetric) {
	n := s.next()
	id := idOf("ftckpt", n)
	j.checkpoints = append(j.checkpoints, map[string]any{
		"object": "fine_tuning.job.checkpoint", "id": id, "created_at": s.stamp(),
		"fine_tuned_model_checkpoint": fmt.Sprintf("ft:%s:curate-fake:%s:%s:ckpt-step-%d", j.model, j.suffix, j.id, m.Step),
		"fine_tuning_job_id":          j.id, "step_number": m.Step, "metrics": checkpointMetrics(m),
	})
}

// succeed finishes the job and writes its result file. The caller holds
// s.mu.
func (j *job) succeed(s *Server) {
	n := s.next()
	result := &file{
		id: idOf("file", n), createdAt: s.stamp(), filename: "step_metrics.csv",
		purpose: "fine-tune-results", content: []byte(base64.StdEncoding.EncodeToString(ResultCSV(j.script.Metrics))),
	}
	s.addFile(result)
	j.resultFiles = []string{result.id}
	j.trainedTokens = trainedTokens(j.model, s.files[j.trainingFile].content, int(toFloat(j.hyper["n_epochs"])))
	j.fineTunedModel = fmt.Sprintf("ft:%s:curate-fake:%s:%s", j.model, j.suffix, j.id)
	j.status, j.finishedAt = "succeeded", s.stamp()
	j.event(s, "info", "message", "New fine-tuned model created", nil)
	j.event(s, "info", "message", "The job has successfully completed", nil)
}

// ResultCSV renders metrics as OpenAI's result file, before the base64
// encoding the API applies.
func ResultCSV(ms []provider.StepMetric) []byte {
	var b bytes.Buffer
	b.WriteString("step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n")
	for _, m := range ms {
		cells := []string{strconv.Itoa(m.Step)}
		for _, v := range []*float64{m.TrainLoss, m.TrainAccuracy, m.ValidLoss, m.ValidMeanTokenAccuracy} {
			cells = append(cells, formatOpt(v))
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	return b.Bytes()
}

func formatOpt(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func stepMessage(m provider.StepMetric, total int) string {
	msg := fmt.Sprintf("Step %d/%d", m.Step, total)
	if m.TrainLoss != nil {
		msg += fmt.Sprintf(": training loss=%.2f", *m.TrainLoss)
	}
	if m.ValidLoss != nil {
		msg += fmt.Sprintf(", validation loss=%.2f", *m.ValidLoss)
	}
	return msg
}

func metricsData(m provider.StepMetric, total int) map[string]any {
	d := map[string]any{"step": m.Step, "total_steps": total}
	putOpt(d, "train_loss", m.TrainLoss)
	putOpt(d, "train_mean_token_accuracy", m.TrainAccuracy)
	putOpt(d, "valid_loss", m.ValidLoss)
	putOpt(d, "valid_mean_token_accuracy", m.ValidMeanTokenAccuracy)
	return d
}

func checkpointMetrics(m provider.StepMetric) map[string]any {
	d := map[string]any{"step": m.Step}
	putOpt(d, "train_loss", m.TrainLoss)
	putOpt(d, "train_mean_token_accuracy", m.TrainAccuracy)
	putOpt(d, "valid_loss", m.ValidLoss)
	putOpt(d, "valid_mean_token_accuracy", m.ValidMeanTokenAccuracy)
	return d
}

func putOpt(d map[string]any, k string, v *float64) {
	if v != nil {
		d[k] = *v
	}
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	}
	return 0
}

func idOf(prefix string, n int) string { return fmt.Sprintf("%s-fake%06d", prefix, n) }

func (s *Server) job(w http.ResponseWriter, r *http.Request) (*job, bool) {
	j, ok := s.jobs[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "No such fine-tuning job: "+r.PathValue("id"), "fine_tuning_job_id", "fine_tune_not_found")
	}
	return j, ok
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	j.advance(s)
	writeJSON(w, http.StatusOK, j.view())
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]string{}
	for k, vs := range r.URL.Query() {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			want[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	var views []map[string]any
	for _, id := range slices.Backward(s.jobOrder) {
		j := s.jobs[id]
		if matches(j.metadata, want) {
			views = append(views, j.view())
		}
	}
	writeJSON(w, http.StatusOK, list(r, views, viewID, 20))
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	events := slices.Clone(j.events)
	slices.Reverse(events)
	writeJSON(w, http.StatusOK, list(r, events, viewID, 20))
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	cps := slices.Clone(j.checkpoints)
	slices.Reverse(cps)
	writeJSON(w, http.StatusOK, list(r, cps, viewID, 10))
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.job(w, r)
	if !ok {
		return
	}
	switch j.status {
	case "succeeded", "failed", "cancelled":
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Job %s has already %s and cannot be cancelled.", j.id, j.status), "", "")
		return
	}
	j.status, j.finishedAt = "cancelled", s.stamp()
	j.event(s, "info", "message", "Fine-tuning job cancelled", nil)
	writeJSON(w, http.StatusOK, j.view())
}

// JobRequest returns the JSON body the job was created with, or nil for an
// unknown id.
func (s *Server) JobRequest(id string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return slices.Clone(j.request)
	}
	return nil
}
