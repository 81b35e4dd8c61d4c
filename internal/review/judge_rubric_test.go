package review_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/review"
	"github.com/curate/curate/internal/rubrics"
	"github.com/curate/curate/internal/secrets"
)

// The judge answers a rubric's label and rating questions as a rater:
// its answers join the question's agreement beside a curator's, and the
// pair's Cohen's kappa is judge-versus-human agreement. Four items, the
// curator none, none, critical, minor and the judge none, minor,
// critical, minor: p_o = 3/4, p_e = (2·1 + 1·1 + 1·2)/16 = 5/16, kappa =
// (0.75 − 0.3125)/(1 − 0.3125) = 0.6364 (Cohen 1960, eq. 1).
func TestJudgeAnswersRubricAsRater(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	u, err := accounts.New(pool, accounts.DefaultSessionTTL).CreateUser(ctx, audit.System, org.ID, accounts.NewUser{Email: "ann@acme.test", Role: "admin", Password: "a-long-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	ann := audit.Actor{Kind: "user", ID: u.ID, Label: u.Email}
	lo, hi := 1, 5
	rs := rubrics.New(pool)
	r, err := rs.Create(ctx, ann, org.ID, rubrics.Input{Name: "Clinical triage", Guidelines: "Critical means a patient could be harmed.", Questions: []rubrics.Question{
		{Key: "urgency_missed", Kind: rubrics.KindLabel, Title: "Urgency missed?", Options: []string{"none", "minor", "critical"}, Required: true},
		{Key: "clarity", Kind: rubrics.KindRating, Title: "Clarity", Min: &lo, Max: &hi},
		{Key: "wrong", Kind: rubrics.KindSpan, Title: "Which sentence is wrong?", Options: []string{"wrong"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	human := []string{"none", "none", "critical", "minor"}
	judged := []string{"none", "minor", "critical", "minor"}
	store := feedback.New(pool)
	var ids []uuid.UUID
	byQuery := map[string]string{}
	for i, h := range human {
		q := fmt.Sprintf("Case %d: chest pain after exercise?", i+1)
		row, _, err := store.Ingest(ctx, org.ID, "api", feedback.Item{Query: q, Response: "Rest and drink water.", FeedbackType: "thumbs_down"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, row.ID)
		byQuery[q] = judged[i]
		if _, err := rs.Answer(ctx, ann, org.ID, row.ID, r.ID, map[string]json.RawMessage{"urgency_missed": json.RawMessage(`"` + h + `"`), "clarity": json.RawMessage(`3`)}); err != nil {
			t.Fatal(err)
		}
	}

	// The stand-in answers in OpenAI's chat shape; the first reply to the
	// last item is not the asked JSON, and the judge is asked again.
	var retried bool
	srv := chattest.New(func(req chattest.Request) chattest.Reply {
		p := req.Last()
		if !strings.Contains(p, "Critical means a patient could be harmed.") || !strings.Contains(p, `"urgency_missed"`) || strings.Contains(p, `"wrong"`) {
			t.Errorf("prompt %q", p)
		}
		for q, label := range byQuery {
			if strings.Contains(p, q) {
				if strings.HasPrefix(q, "Case 4") && !retried {
					retried = true
					return chattest.Reply{Content: `{"urgency_missed": "severe", "clarity": 4}`, PromptTokens: 100, CompletionTokens: 10}
				}
				return chattest.Reply{Content: `{"urgency_missed": "` + label + `", "clarity": 4}`, PromptTokens: 100, CompletionTokens: 10}
			}
		}
		return chattest.Reply{Content: `{}`}
	})
	t.Cleanup(srv.Close)
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	eps := endpoints.New(pool, box, &outbound.Client{Policy: policy, Timeout: time.Second})
	if _, err := eps.Create(ctx, audit.System, org.ID, endpoints.NewEndpoint{Name: "deepseek", BaseURL: srv.URL + "/v1", Model: "deepseek-chat",
		APIKey: "sk-secret", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10}); err != nil {
		t.Fatal(err)
	}
	rs.Judge = judge.New(pool, eps, nil, pricing.Dollars(5))

	out, err := rs.AskJudge(ctx, ann, org.ID, r.ID, "deepseek", ids)
	if err != nil {
		t.Fatal(err)
	}
	if out.Answered != 4 || len(out.Invalid) != 0 || out.Calls != 5 {
		t.Fatalf("judged %+v; want 4 answered in 5 calls (one retried)", out)
	}
	if _, err := rs.AskJudge(ctx, ann, org.ID, r.ID, "nobody", ids); err == nil {
		t.Fatal("an unknown endpoint was asked")
	}
	// An unknown item refuses the request before the judge is asked.
	var inv *errs.Invalid
	if _, err := rs.AskJudge(ctx, ann, org.ID, r.ID, "deepseek", []uuid.UUID{ids[0], uuid.New()}); !errors.As(err, &inv) || inv.ByField()["feedback_ids[1]"] == "" || srv.Calls() != 5 {
		t.Fatalf("an unknown item: %v, %d calls", err, srv.Calls())
	}

	qa, err := review.New(pool).QuestionAgreement(ctx, org.ID, feedback.Filter{}, r.ID, "urgency_missed")
	if err != nil {
		t.Fatal(err)
	}
	if qa.Items != 4 || qa.Answers != 8 || len(qa.Reviewers) != 2 {
		t.Fatalf("agreement over %d items, %d answers, reviewers %+v", qa.Items, qa.Answers, qa.Reviewers)
	}
	if len(qa.Pairs) != 1 || qa.Pairs[0].Value == nil {
		t.Fatalf("pairs %+v", qa.Pairs)
	}
	p := qa.Pairs[0]
	if names := p.A.Email + "," + p.B.Email; !strings.Contains(names, "Judge deepseek") || !strings.Contains(names, "ann@acme.test") {
		t.Fatalf("pair %s", names)
	}
	if p.Metric != "cohen_kappa" || math.Abs(*p.Value-0.6364) > 5e-5 || p.Agreed != 3 {
		t.Fatalf("judge-versus-human kappa %v (%d agreed), want 0.6364 (3)", *p.Value, p.Agreed)
	}
}
