package bedrocktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

type job struct {
	arn, id, name, token, modelName, baseModel, roleARN string
	trainURI, validURI, outputURI                       string
	hyper                                               map[string]string
	created, modified, ended                            int
	script                                              Script
	request                                             []byte

	status    string // InProgress, Completed, Failed, Stopping, Stopped
	polls     int
	stopPolls int // fetches since the stop
	failure   string
}

// createRequest is the part of the CreateModelCustomizationJob body the
// fake reads.
type createRequest struct {
	JobName             string            `json:"jobName"`
	CustomModelName     string            `json:"customModelName"`
	RoleArn             string            `json:"roleArn"`
	ClientRequestToken  string            `json:"clientRequestToken"`
	BaseModelIdentifier string            `json:"baseModelIdentifier"`
	CustomizationType   string            `json:"customizationType"`
	HyperParameters     map[string]string `json:"hyperParameters"`
	TrainingDataConfig  struct {
		S3Uri string `json:"s3Uri"`
	} `json:"trainingDataConfig"`
	ValidationDataConfig *struct {
		Validators []struct {
			S3Uri string `json:"s3Uri"`
		} `json:"validators"`
	} `json:"validationDataConfig"`
	OutputDataConfig struct {
		S3Uri string `json:"s3Uri"`
	} `json:"outputDataConfig"`
}

func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		writeError(false, w, http.StatusBadRequest, "ValidationException", "Could not read the request body.")
		return
	}
	var req createRequest
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		writeError(false, w, http.StatusBadRequest, "SerializationException", "Could not parse the request body.")
		return
	}
	for _, f := range []struct{ name, value string }{
		{"jobName", req.JobName}, {"customModelName", req.CustomModelName}, {"roleArn", req.RoleArn},
		{"baseModelIdentifier", req.BaseModelIdentifier}, {"trainingDataConfig.s3Uri", req.TrainingDataConfig.S3Uri},
		{"outputDataConfig.s3Uri", req.OutputDataConfig.S3Uri},
	} {
		if f.value == "" {
			writeError(false, w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", f.name))
			return
		}
	}

	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if arn, ok := s.tokens[req.ClientRequestToken]; ok && req.ClientRequestToken != "" {
		writeJSON(w, http.StatusCreated, map[string]string{"jobArn": arn})
		return
	}
	for _, j := range s.jobs {
		if j.name == req.JobName {
			writeError(false, w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("A model customization job named %s already exists.", req.JobName))
			return
		}
	}
	uris := []string{req.TrainingDataConfig.S3Uri}
	var validURI string
	if v := req.ValidationDataConfig; v != nil && len(v.Validators) > 0 {
		validURI = v.Validators[0].S3Uri
		uris = append(uris, validURI)
	}
	for _, uri := range uris {
		if !s.exists(uri) {
			writeError(false, w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("The provided S3 URI %s does not exist or Bedrock cannot read it.", uri))
			return
		}
	}

	n := s.next()
	id := fmt.Sprintf("fakejob%06d", n)
	j := &job{
		arn: fmt.Sprintf("arn:aws:bedrock:%s:%s:model-customization-job/%s/%s", Region, Account, req.BaseModelIdentifier, id),
		id:  id, name: req.JobName, token: req.ClientRequestToken, modelName: req.CustomModelName,
		baseModel: req.BaseModelIdentifier, roleARN: req.RoleArn, trainURI: req.TrainingDataConfig.S3Uri,
		validURI: validURI, outputURI: req.OutputDataConfig.S3Uri, hyper: req.HyperParameters,
		created: n, modified: n, script: s.script, request: body.Bytes(), status: "InProgress",
	}
	s.jobs[j.arn] = j
	s.jobOrder = append(s.jobOrder, j.arn)
	if j.token != "" {
		s.tokens[j.token] = j.arn
	}
	s.jobsCreated++
	writeJSON(w, http.StatusCreated, map[string]string{"jobArn": j.arn})
}

// exists reports whether an s3:// URI names a stored object. The caller
// holds s.mu.
func (s *Server) exists(uri string) bool {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
	_, ok := s.buckets[bucket][key]
	return ok
}

// find looks a job up by ARN or name. The caller holds s.mu.
func (s *Server) find(w http.ResponseWriter, id string) (*job, bool) {
	if j, ok := s.jobs[id]; ok {
		return j, true
	}
	for _, j := range s.jobs {
		if j.name == id {
			return j, true
		}
	}
	writeError(false, w, http.StatusNotFound, "ResourceNotFoundException", "Could not find a model customization job named "+id+".")
	return nil, false
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.find(w, r.PathValue("id"))
	if !ok {
		return
	}
	j.advance(s)
	writeJSON(w, http.StatusOK, j.view())
}

// advance moves the job one fetch along its script. The caller holds s.mu.
func (j *job) advance(s *Server) {
	sc := j.script
	switch j.status {
	case "Stopping":
		j.stopPolls++
		if j.stopPolls > sc.StopPolls {
			j.status, j.ended = "Stopped", s.next()
			j.modified = j.ended
		}
		return
	case "InProgress":
	default:
		return
	}
	j.polls++
	switch {
	case j.polls <= sc.ValidatingPolls:
		return
	case sc.FailMessage != "":
		j.status, j.failure, j.ended = "Failed", sc.FailMessage, s.next()
	case j.polls <= sc.ValidatingPolls+sc.TrainingPolls:
		// Training poll k of K has written the first k/K of the steps.
		k := j.polls - sc.ValidatingPolls
		j.writeMetrics(s, len(sc.TrainingMetrics)*k/max(sc.TrainingPolls, 1), 0)
		return
	default:
		j.writeMetrics(s, len(sc.TrainingMetrics), len(sc.ValidationMetrics))
		j.status, j.ended = "Completed", s.next()
	}
	j.modified = j.ended
}

// outputPrefix is where Bedrock writes this job's files: the bucket and
// the key prefix "<output>/model-customization-job-<id>/".
func (j *job) outputPrefix() (bucket, prefix string) {
	bucket, prefix, _ = strings.Cut(strings.TrimPrefix(j.outputURI, "s3://"), "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return bucket, prefix + "model-customization-job-" + j.id + "/"
}

// writeMetrics writes the first train training rows and the first valid
// validation rows. The caller holds s.mu.
func (j *job) writeMetrics(s *Server, train, valid int) {
	bucket, prefix := j.outputPrefix()
	s.putLocked(bucket, prefix+"training_artifacts/step_wise_training_metrics.csv",
		MetricsCSV("training_loss", j.script.TrainingMetrics[:train]))
	if valid > 0 && j.validURI != "" {
		s.putLocked(bucket, prefix+"validation_artifacts/post_fine_tuning_validation/validation/validation_metrics.csv",
			MetricsCSV("validation_loss", j.script.ValidationMetrics[:valid]))
	}
}

// MetricsCSV renders rows as Bedrock's metrics files do, with lossColumn
// ("training_loss" or "validation_loss") for the loss.
func MetricsCSV(lossColumn string, rows []Row) []byte {
	var b bytes.Buffer
	b.WriteString("step_number,epoch_number," + lossColumn + ",perplexity\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%d,%s,%s\n", r.Step, r.Epoch, num(r.Loss), num(r.Perplexity))
	}
	return b.Bytes()
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (j *job) view() map[string]any {
	v := map[string]any{
		"jobArn": j.arn, "jobName": j.name, "outputModelName": j.modelName, "roleArn": j.roleARN,
		"status": j.status, "creationTime": stamp(j.created), "lastModifiedTime": stamp(j.modified),
		"baseModelArn":       fmt.Sprintf("arn:aws:bedrock:%s::foundation-model/%s", Region, j.baseModel),
		"hyperParameters":    j.hyper,
		"trainingDataConfig": map[string]string{"s3Uri": j.trainURI},
		"outputDataConfig":   map[string]string{"s3Uri": j.outputURI},
		"customizationType":  "FINE_TUNING",
	}
	if j.token != "" {
		v["clientRequestToken"] = j.token
	}
	if j.validURI != "" {
		v["validationDataConfig"] = map[string]any{"validators": []map[string]string{{"s3Uri": j.validURI}}}
	}
	if j.ended != 0 {
		v["endTime"] = stamp(j.ended)
	}
	if j.status == "InProgress" {
		processing := "Completed"
		if j.polls <= j.script.ValidatingPolls {
			processing = "InProgress"
		}
		v["statusDetails"] = map[string]any{"dataProcessingDetails": map[string]any{"status": processing}}
	}
	switch j.status {
	case "Failed":
		v["failureMessage"] = j.failure
	case "Completed":
		v["outputModelArn"] = fmt.Sprintf("arn:aws:bedrock:%s:%s:custom-model/%s/%s", Region, Account, j.baseModel, j.id)
		if rows := j.script.TrainingMetrics; len(rows) > 0 {
			v["trainingMetrics"] = map[string]float64{"trainingLoss": rows[len(rows)-1].Loss}
		}
		if rows := j.script.ValidationMetrics; len(rows) > 0 && j.validURI != "" {
			v["validationMetrics"] = []map[string]float64{{"validationLoss": rows[len(rows)-1].Loss}}
		}
	}
	return v
}

func (j *job) summary() map[string]any {
	v := map[string]any{
		"jobArn": j.arn, "jobName": j.name, "status": j.status, "creationTime": stamp(j.created),
		"lastModifiedTime": stamp(j.modified), "customModelName": j.modelName, "customizationType": "FINE_TUNING",
		"baseModelArn": fmt.Sprintf("arn:aws:bedrock:%s::foundation-model/%s", Region, j.baseModel),
	}
	if j.ended != 0 {
		v["endTime"] = stamp(j.ended)
	}
	return v
}

// listJobs answers ListModelCustomizationJobs, newest first unless
// sortOrder=Ascending; nextToken is the count of jobs already listed.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*job
	for _, arn := range s.jobOrder {
		j := s.jobs[arn]
		if strings.Contains(j.name, q.Get("nameContains")) && (q.Get("statusEquals") == "" || q.Get("statusEquals") == j.status) {
			matched = append(matched, j)
		}
	}
	if q.Get("sortOrder") != "Ascending" {
		slices.Reverse(matched)
	}
	start, _ := strconv.Atoi(q.Get("nextToken"))
	limit := 100
	if n, err := strconv.Atoi(q.Get("maxResults")); err == nil && n > 0 && n < limit {
		limit = n
	}
	start = min(start, len(matched))
	end := min(start+limit, len(matched))
	summaries := []map[string]any{}
	for _, j := range matched[start:end] {
		summaries = append(summaries, j.summary())
	}
	out := map[string]any{"modelCustomizationJobSummaries": summaries}
	if end < len(matched) {
		out["nextToken"] = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) stopJob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.find(w, r.PathValue("id"))
	if !ok {
		return
	}
	if j.status != "InProgress" {
		writeError(false, w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("Job %s is %s and cannot be stopped.", j.name, j.status))
		return
	}
	j.status, j.modified = "Stopping", s.next()
	writeJSON(w, http.StatusOK, map[string]any{})
}

// JobRequest returns the JSON body a job was created with, by ARN, or nil.
func (s *Server) JobRequest(arn string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[arn]; ok {
		return bytes.Clone(j.request)
	}
	return nil
}
