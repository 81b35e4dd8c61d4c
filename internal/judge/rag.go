package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
)

// The retrieval-augmented generation metrics, as RAGAS defines them. Each
// asks the judge model narrow questions (what the answer claims, whether
// the context supports each claim, which documents were useful) and
// computes the score from its verdicts, so the number can be checked by
// hand from the verdicts shown with it:
//
//   - faithfulness: the share of the answer's claims that the context
//     documents support;
//   - answer_relevancy: the mean cosine similarity between the question
//     and questions the judge writes from the answer alone (0 when the
//     answer is noncommittal), on an embeddings endpoint;
//   - context_precision: the average precision of the documents' ranking,
//     each judged useful or not for reaching the reference answer;
//   - context_recall: the share of the reference answer's statements that
//     the context documents support.
const (
	RAGFaithfulness     = scorers.RAGFaithfulness
	RAGAnswerRelevancy  = scorers.RAGAnswerRelevancy
	RAGContextPrecision = scorers.RAGContextPrecision
	RAGContextRecall    = scorers.RAGContextRecall
)

// ragPromptVersion is part of every RAG judgement's cache key: a change to
// the prompts below must raise it, so no old verdict answers a new prompt.
const ragPromptVersion = 1

// RAGRequest names the metric, the judge that gives its verdicts, and for
// answer relevancy the embeddings endpoint.
type RAGRequest struct {
	Metric   string
	Endpoint string
	// Embeddings names the endpoint whose model embeds text (POST
	// /embeddings), for answer_relevancy.
	Embeddings string
	// Questions is how many questions answer_relevancy asks the judge to
	// write from the answer (RAGAS's strictness; default 3).
	Questions int
	Input     scorers.Input
	Purpose   string
}

// RAG scores one item on one RAG metric. A cached score is returned
// without a call. An item the metric cannot score (no context documents,
// no reference, an answer that claims nothing) is an invalid judgement
// with the reason, and is cached like a score.
func (s *Service) RAG(ctx context.Context, orgID uuid.UUID, r RAGRequest) (Judgement, error) {
	if r.Questions <= 0 {
		r.Questions = 3
	}
	ep, client, err := s.Endpoints.Client(ctx, orgID, r.Endpoint)
	if err != nil {
		return Judgement{}, err
	}
	keyText := fmt.Sprintf("rag:%s:v%d:n%d", r.Metric, ragPromptVersion, r.Questions)
	var emb endpoints.Endpoint
	var embClient *chat.Client
	if r.Metric == RAGAnswerRelevancy {
		if emb, embClient, err = s.Endpoints.Client(ctx, orgID, r.Embeddings); err != nil {
			return Judgement{}, err
		}
		keyText += ":" + emb.BaseURL + ":" + emb.Model
	}
	q := db.New(s.Pool)
	key := CacheKey(keyText, ep.BaseURL, ep.Model, r.Input)
	if c, err := q.JudgeCacheGet(ctx, db.JudgeCacheGetParams{OrgID: orgID, Key: key}); err == nil {
		return Judgement{Score: c.Score.Float64, Critique: c.Critique, Invalid: c.InvalidReason, Cached: true}, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Judgement{}, err
	}
	m := &ragMetric{s: s, orgID: orgID, ep: ep, client: client, purpose: r.Purpose, metric: r.Metric}
	var v ragValue
	switch r.Metric {
	case RAGFaithfulness:
		v, err = m.faithfulness(ctx, r.Input)
	case RAGContextRecall:
		v, err = m.contextRecall(ctx, r.Input)
	case RAGContextPrecision:
		v, err = m.contextPrecision(ctx, r.Input)
	case RAGAnswerRelevancy:
		v, err = m.answerRelevancy(ctx, r.Input, r.Questions, emb, embClient)
	default:
		return Judgement{}, fmt.Errorf("judge: no RAG metric is named %q", r.Metric)
	}
	out := Judgement{Score: v.score, Critique: v.explanation, Invalid: v.invalid, Calls: m.calls, Cost: m.cost}
	if err != nil {
		return out, err
	}
	c := db.JudgeCacheInsertParams{OrgID: orgID, Key: key, Critique: out.Critique, InvalidReason: out.Invalid}
	if out.Invalid == "" {
		c.Score = pgtype.Float8{Float64: out.Score, Valid: true}
	}
	return out, q.JudgeCacheInsert(ctx, c)
}

// ragValue is a metric's outcome: a score with the verdicts behind it, or
// why there is none.
type ragValue struct {
	score       float64
	explanation string
	invalid     string
}

func ragInvalid(format string, args ...any) ragValue {
	return ragValue{invalid: fmt.Sprintf(format, args...)}
}

// ragMetric asks one judge for one item's verdicts, adding up the calls.
type ragMetric struct {
	s       *Service
	orgID   uuid.UUID
	ep      endpoints.Endpoint
	client  *chat.Client
	purpose string
	metric  string
	calls   int
	cost    pricing.Micros
}

// ask sends one prompt and decodes the JSON answer into out. An answer
// that never decodes is returned as its reason, with no error.
func (m *ragMetric) ask(ctx context.Context, step, prompt string, out any, check func() error) (invalid string, err error) {
	asked, err := m.s.Ask(ctx, m.orgID, Ask{Endpoint: m.ep, Client: m.client, Prompt: prompt, Purpose: m.purpose, What: "judge",
		Template: Template{Name: "rag_" + m.metric + "_" + step, Version: ragPromptVersion},
		Parse: func(content string) error {
			dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(content)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(out); err != nil {
				return errors.New("not the asked JSON object")
			}
			return check()
		}})
	m.calls += asked.Calls
	m.cost += asked.Cost
	return asked.Invalid, err
}

type verdict struct {
	Statement string `json:"statement"`
	Reason    string `json:"reason"`
	Verdict   *int   `json:"verdict"`
}

// checkVerdicts requires one 0-or-1 verdict for each of n statements.
func checkVerdicts(vs []verdict, n int) error {
	if len(vs) != n {
		return fmt.Errorf("%d verdicts for %d statements", len(vs), n)
	}
	for i, v := range vs {
		if v.Verdict == nil || (*v.Verdict != 0 && *v.Verdict != 1) {
			return fmt.Errorf("verdict %d is not 0 or 1", i+1)
		}
	}
	return nil
}

// supported is the share of verdicts that are 1, with the verdicts listed.
func supported(vs []verdict, what string) ragValue {
	var yes int
	var b strings.Builder
	for i, v := range vs {
		mark := "not supported"
		if *v.Verdict == 1 {
			yes++
			mark = "supported"
		}
		fmt.Fprintf(&b, "%d. %s: %s", i+1, strings.TrimSpace(v.Statement), mark)
		if r := strings.TrimSpace(v.Reason); r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
		b.WriteString("\n")
	}
	return ragValue{score: float64(yes) / float64(len(vs)),
		explanation: fmt.Sprintf("%d of %d %s supported by the context.\n%s", yes, len(vs), what, strings.TrimSpace(b.String()))}
}

func numbered(items []string) string {
	var b strings.Builder
	for i, it := range items {
		fmt.Fprintf(&b, "%d. %s\n", i+1, it)
	}
	return strings.TrimSpace(b.String())
}

func documents(docs []string) string {
	var b strings.Builder
	for i, d := range docs {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, d)
	}
	return strings.TrimSpace(b.String())
}

// faithfulness: the answer's claims, then a verdict on each against the
// context.
func (m *ragMetric) faithfulness(ctx context.Context, in scorers.Input) (ragValue, error) {
	if len(in.Context) == 0 {
		return ragInvalid("Faithfulness needs the item's context documents; it has none."), nil
	}
	var claims struct {
		Statements []string `json:"statements"`
	}
	prompt := "Split the answer below into the separate factual claims it makes. Each claim is one short sentence that can be " +
		"checked on its own: replace pronouns with what they refer to, and leave out greetings and opinions that claim nothing.\n\n" +
		"Question: " + in.Query + "\n\nAnswer: " + in.Answer + "\n\n" +
		`Reply with JSON only: {"statements": ["claim", ...]}`
	if bad, err := m.ask(ctx, "claims", prompt, &claims, func() error { return nil }); bad != "" || err != nil {
		return ragValue{invalid: bad}, err
	}
	if len(claims.Statements) == 0 {
		return ragInvalid("The answer makes no claim to check against the context."), nil
	}
	var got struct {
		Statements []verdict `json:"statements"`
	}
	prompt = "For each numbered claim, decide whether it can be inferred from the context documents alone. Verdict 1 when the " +
		"context supports it, 0 when the context contradicts it or does not say.\n\nContext documents:\n" + documents(in.Context) +
		"\n\nClaims:\n" + numbered(claims.Statements) + "\n\n" +
		`Reply with JSON only, one entry per claim in order: {"statements": [{"statement": "claim", "reason": "why", "verdict": 0 or 1}, ...]}`
	bad, err := m.ask(ctx, "verdicts", prompt, &got, func() error { return checkVerdicts(got.Statements, len(claims.Statements)) })
	if bad != "" || err != nil {
		return ragValue{invalid: bad}, err
	}
	return supported(got.Statements, "claims of the answer are"), nil
}

// contextRecall: each statement of the reference, judged attributable to
// the context or not.
func (m *ragMetric) contextRecall(ctx context.Context, in scorers.Input) (ragValue, error) {
	switch {
	case len(in.Context) == 0:
		return ragInvalid("Context recall needs the item's context documents; it has none."), nil
	case strings.TrimSpace(in.Reference) == "":
		return ragInvalid("Context recall needs a reference answer; the item has none."), nil
	}
	var got struct {
		Statements []verdict `json:"statements"`
	}
	prompt := "Split the reference answer below into its statements, and for each decide whether the context documents " +
		"support it: verdict 1 when the statement can be attributed to the context, 0 when it cannot.\n\nQuestion: " + in.Query +
		"\n\nContext documents:\n" + documents(in.Context) + "\n\nReference answer: " + in.Reference + "\n\n" +
		`Reply with JSON only: {"statements": [{"statement": "statement", "reason": "why", "verdict": 0 or 1}, ...]}`
	bad, err := m.ask(ctx, "verdicts", prompt, &got, func() error {
		if len(got.Statements) == 0 {
			return errors.New("no statements")
		}
		return checkVerdicts(got.Statements, len(got.Statements))
	})
	if bad != "" || err != nil {
		return ragValue{invalid: bad}, err
	}
	return supported(got.Statements, "statements of the reference are"), nil
}

// contextPrecision: each document in its rank, judged useful or not for
// reaching the reference answer; the score is their average precision.
func (m *ragMetric) contextPrecision(ctx context.Context, in scorers.Input) (ragValue, error) {
	switch {
	case len(in.Context) == 0:
		return ragInvalid("Context precision needs the item's context documents; it has none."), nil
	case strings.TrimSpace(in.Reference) == "":
		return ragInvalid("Context precision needs a reference answer; the item has none."), nil
	}
	useful := make([]int, len(in.Context))
	var b strings.Builder
	for i, doc := range in.Context {
		var got struct {
			Reason  string `json:"reason"`
			Verdict *int   `json:"verdict"`
		}
		prompt := "Was the document below useful in arriving at the reference answer to the question? Verdict 1 when it was, " +
			"0 when it was not.\n\nQuestion: " + in.Query + "\n\nDocument: " + doc + "\n\nReference answer: " + in.Reference + "\n\n" +
			`Reply with JSON only: {"reason": "why", "verdict": 0 or 1}`
		bad, err := m.ask(ctx, "verdict", prompt, &got, func() error {
			if got.Verdict == nil || (*got.Verdict != 0 && *got.Verdict != 1) {
				return errors.New("the verdict is not 0 or 1")
			}
			return nil
		})
		if bad != "" || err != nil {
			return ragValue{invalid: bad}, err
		}
		useful[i] = *got.Verdict
		mark := "not useful"
		if useful[i] == 1 {
			mark = "useful"
		}
		fmt.Fprintf(&b, "[%d] %s", i+1, mark)
		if r := strings.TrimSpace(got.Reason); r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
		b.WriteString("\n")
	}
	score := AveragePrecision(useful)
	return ragValue{score: score, explanation: fmt.Sprintf("Average precision of the documents' order: %s.\n%s",
		strconv.FormatFloat(score, 'f', 4, 64), strings.TrimSpace(b.String()))}, nil
}

// AveragePrecision is Σₖ precision@k · vₖ over the relevant count, for
// relevance verdicts vₖ ∈ {0, 1} in rank order; 0 when none is relevant.
func AveragePrecision(v []int) float64 {
	var hits, sum float64
	for k, r := range v {
		if r == 1 {
			hits++
			sum += hits / float64(k+1)
		}
	}
	if hits == 0 {
		return 0
	}
	return sum / hits
}

// answerRelevancy: questions written from the answer alone, compared with
// the question asked by the cosine similarity of their embeddings.
func (m *ragMetric) answerRelevancy(ctx context.Context, in scorers.Input, n int, emb endpoints.Endpoint, embClient *chat.Client) (ragValue, error) {
	if strings.TrimSpace(in.Query) == "" {
		return ragInvalid("Answer relevancy needs the question; the item has none."), nil
	}
	var got struct {
		Questions    []string `json:"questions"`
		Noncommittal *int     `json:"noncommittal"`
	}
	prompt := fmt.Sprintf("Write %d different questions that the answer below answers, as a user would ask them, using only the "+
		"answer. Also say whether the answer is noncommittal: 1 when it is evasive or vague (\"I don't know\", \"I'm not sure\"), "+
		"0 otherwise.\n\nAnswer: %s\n\n"+`Reply with JSON only: {"questions": ["question", ...], "noncommittal": 0 or 1}`, n, in.Answer)
	bad, err := m.ask(ctx, "questions", prompt, &got, func() error {
		if len(got.Questions) == 0 {
			return errors.New("no questions")
		}
		if got.Noncommittal == nil || (*got.Noncommittal != 0 && *got.Noncommittal != 1) {
			return errors.New("noncommittal is not 0 or 1")
		}
		return nil
	})
	if bad != "" || err != nil {
		return ragValue{invalid: bad}, err
	}
	vecs, err := m.embed(ctx, emb, embClient, append([]string{in.Query}, got.Questions...))
	if err != nil {
		var answer *chat.AnswerError
		if errors.As(err, &answer) {
			return ragInvalid("The embeddings endpoint's answer was not usable: %s", answer.Reason), nil
		}
		return ragValue{}, err
	}
	sims := make([]float64, len(got.Questions))
	var mean float64
	for i := range got.Questions {
		sims[i] = Cosine(vecs[0], vecs[i+1])
		if math.IsNaN(sims[i]) {
			return ragInvalid("An embedding had no length: the similarity is undefined."), nil
		}
		mean += sims[i] / float64(len(sims))
	}
	var b strings.Builder
	for i, q := range got.Questions {
		fmt.Fprintf(&b, "%d. %s (similarity %s)\n", i+1, q, strconv.FormatFloat(sims[i], 'f', 4, 64))
	}
	if *got.Noncommittal == 1 {
		return ragValue{score: 0, explanation: "The answer is noncommittal, so it scores 0.\n" + strings.TrimSpace(b.String())}, nil
	}
	// Cosine similarity can be negative for vectors pointing apart; a
	// score reads 0–1, so such an answer scores 0 (unrelated).
	score := max(0, min(1, mean))
	return ragValue{score: score, explanation: fmt.Sprintf("Mean similarity of %d questions written from the answer to the question asked: %s.\n%s",
		len(sims), strconv.FormatFloat(mean, 'f', 4, 64), strings.TrimSpace(b.String()))}, nil
}

// embed asks for the texts' vectors within the judge budget, logging the
// call as a judge call.
func (m *ragMetric) embed(ctx context.Context, ep endpoints.Endpoint, client *chat.Client, texts []string) ([][]float64, error) {
	q := db.New(m.s.Pool)
	var n int64
	for _, t := range texts {
		n += int64(len(t)) + promptOverhead
	}
	res, err := m.s.reserve(ctx, q, m.orgID, ep.Cost(n, 0), m.purpose)
	if err != nil {
		return nil, err
	}
	got, err := client.Embed(ctx, ep.Model, texts)
	call := db.JudgeCallInsertParams{OrgID: m.orgID, Endpoint: ep.Name, Model: ep.Model, Template: "rag_" + m.metric + "_embeddings",
		TemplateVersion: ragPromptVersion, Purpose: m.purpose, PromptTokens: got.PromptTokens, LatencyMs: int32(got.Latency / time.Millisecond),
		CostMicros: int64(ep.Cost(got.PromptTokens, 0)), Outcome: "ok"}
	var answer *chat.AnswerError
	switch {
	case errors.As(err, &answer):
		call.Outcome = "malformed"
	case err != nil:
		call.Outcome = "failed"
	}
	var logged *db.JudgeCallInsertParams
	if got.Tries > 0 {
		m.calls++
		m.cost += pricing.Micros(call.CostMicros)
		logged = &call
	}
	if serr := m.s.settle(context.WithoutCancel(ctx), res, logged); serr != nil {
		return nil, serr
	}
	return got.Vectors, err
}

// Cosine is the cosine similarity of two vectors; NaN when either has no
// length or they differ in dimension.
func Cosine(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	var dot, na, nb float64
	for i := range a {
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
