package judge_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup registers the stand-in as the endpoint "deepseek" priced at $0.27
// and $1.10 per million tokens.
func setup(t *testing.T, script func(chattest.Request) chattest.Reply) (*judge.Service, uuid.UUID, *chattest.Server) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	org, err := accounts.New(pool, accounts.DefaultSessionTTL).EnsureOrg(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.New(strings.Repeat("k", 32))
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	eps := endpoints.New(pool, box, &outbound.Client{Policy: policy, Timeout: 300 * time.Millisecond})
	eps.Attempts, eps.RetryDelay = 3, time.Millisecond
	srv := chattest.New(script)
	t.Cleanup(srv.Close)
	if _, err := eps.Create(ctx, audit.System, org.ID, endpoints.NewEndpoint{Name: "deepseek", BaseURL: srv.URL + "/v1", Model: "deepseek-chat",
		APIKey: "sk-secret", PricePerMillionInput: 0.27, PricePerMillionOutput: 1.10}); err != nil {
		t.Fatal(err)
	}
	return judge.New(pool, eps, nil, pricing.Dollars(5)), org.ID, srv
}

func TestJudgeCachesAndCosts(t *testing.T) {
	ctx := context.Background()
	svc, org, srv := setup(t, func(r chattest.Request) chattest.Reply {
		if !strings.Contains(r.Last(), "Reset the router") {
			t.Errorf("prompt lacks the answer: %q", r.Last())
		}
		return chattest.Reply{Content: `{"score": 0.8, "safety_flag": false, "critique": "Misses the cable check."}`,
			PromptTokens: 1000, CompletionTokens: 200}
	})
	in := scorers.Input{Query: "My internet is down", Answer: "Reset the router.", Reference: "Check the cable, then reset."}
	j, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in, Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 × $0.27/M + 200 × $1.10/M = $0.00027 + $0.00022 = $0.00049.
	if j.Score != 0.8 || j.Safety || j.Critique != "Misses the cable check." || j.Cached || j.Calls != 1 || j.Cost != 490 {
		t.Fatalf("judgement %+v", j)
	}
	if got := srv.Requests()[0]; got.ResponseFormat == nil || got.ResponseFormat.Type != "json_object" || got.Authorization != "Bearer sk-secret" {
		t.Fatalf("request %+v", got)
	}
	again, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in})
	if err != nil || !again.Cached || again.Score != 0.8 || again.Calls != 0 || srv.Calls() != 1 {
		t.Fatalf("second judgement %+v %v, %d calls", again, err, srv.Calls())
	}
	// Another answer is another judgement.
	in.Answer = "Reset the router twice."
	if _, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in}); err != nil || srv.Calls() != 2 {
		t.Fatalf("%v, %d calls", err, srv.Calls())
	}
	b, err := svc.Budget(ctx, org)
	if err != nil || b.Spent != 980 || b.Calls != 2 || b.Monthly != pricing.Dollars(5) {
		t.Fatalf("budget %+v %v", b, err)
	}
}

func TestJudgeMalformed(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, content, want string }{
		{"not json", "The answer is fine, 9/10.", "not a JSON object"},
		{"score above one", `{"score": 7, "safety_flag": false, "critique": "ok"}`, "score 7 is outside 0–1"},
		{"no safety flag", `{"score": 0.5, "critique": "ok"}`, "no safety_flag"},
		{"score a string", `{"score": "high", "safety_flag": false, "critique": "ok"}`, "not a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc, org, srv := setup(t, func(chattest.Request) chattest.Reply { return chattest.Reply{Content: c.content} })
			in := scorers.Input{Query: "q", Answer: "a"}
			j, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in})
			if err != nil {
				t.Fatal(err)
			}
			// Asked twice, then recorded as invalid: never a score.
			if srv.Calls() != 2 || !strings.Contains(j.Invalid, c.want) || j.AsScore().Valid() || j.Calls != 2 {
				t.Fatalf("%d calls, judgement %+v", srv.Calls(), j)
			}
			again, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in})
			if err != nil || !again.Cached || again.Invalid != j.Invalid || srv.Calls() != 2 {
				t.Fatalf("again %+v %v, %d calls", again, err, srv.Calls())
			}
		})
	}
	// A malformed answer followed by a good one is a score.
	var n atomic.Int64
	svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
		if n.Add(1) == 1 {
			return chattest.Reply{Content: "{"}
		}
		return chattest.Reply{Content: `{"score": 1, "safety_flag": true, "critique": "Unsafe dose."}`}
	})
	j, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: scorers.Input{Query: "q", Answer: "a"}})
	if err != nil || j.Invalid != "" || j.Score != 1 || !j.Safety || srv.Calls() != 2 {
		t.Fatalf("%+v %v %d", j, err, srv.Calls())
	}
}

func TestJudgeFailuresAreNotCached(t *testing.T) {
	ctx := context.Background()
	var storm atomic.Bool
	storm.Store(true)
	svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
		if storm.Load() {
			return chattest.Reply{Status: 429}
		}
		return chattest.Reply{Content: `{"score": 0.5, "safety_flag": false, "critique": "ok"}`}
	})
	in := scorers.Input{Query: "q", Answer: "a"}
	_, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in})
	if got := judge.Describe(err); got != "The server answered 429 Too Many Requests." || srv.Calls() != 3 {
		t.Fatalf("%q after %d calls", got, srv.Calls())
	}
	storm.Store(false)
	j, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in})
	if err != nil || j.Cached || j.Score != 0.5 {
		t.Fatalf("%+v %v", j, err)
	}
	if _, err := svc.Judge(ctx, org, judge.Request{Endpoint: "nobody", Input: in}); judge.Describe(err) != "No endpoint has the judge's name." {
		t.Fatalf("unknown endpoint: %v", err)
	}
}

func TestJudgeBudget(t *testing.T) {
	ctx := context.Background()
	svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.5, "safety_flag": false, "critique": "ok"}`, PromptTokens: 1_000_000}
	})
	// Each call costs $0.27; a budget of $0.50 allows two calls, then
	// refuses.
	if err := svc.SetBudget(ctx, audit.System, org, pricing.Dollars(0.5)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: scorers.Input{Query: "q", Answer: string(rune('a' + i))}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: scorers.Input{Query: "q", Answer: "c"}})
	var budget *judge.BudgetError
	if !errors.As(err, &budget) || srv.Calls() != 2 || !strings.Contains(outbound.Describe(err), "judge budget for this month is spent ($0.5400 of $0.5000)") {
		t.Fatalf("%v (%q), %d calls", err, outbound.Describe(err), srv.Calls())
	}
	var inv *errs.Invalid
	if err := svc.SetBudget(ctx, audit.System, org, -1); !errors.As(err, &inv) {
		t.Fatalf("negative budget: %v", err)
	}
}

func TestTemplates(t *testing.T) {
	ctx := context.Background()
	svc, org, srv := setup(t, func(r chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"score": 0.5, "safety_flag": false, "critique": "ok"}`}
	})
	tpl, err := svc.Template(ctx, org, "")
	if err != nil || tpl.Version != 1 || tpl.Body != judge.DefaultBody {
		t.Fatalf("%+v %v", tpl, err)
	}
	in := scorers.Input{Query: "q {{answer}}", Context: []string{"doc one", "doc two"}, Answer: "the answer", Reference: "ref"}
	got := tpl.Render(in)
	if !strings.Contains(got, "q {{answer}}") || !strings.Contains(got, "[1] doc one\n\n[2] doc two") || !strings.Contains(got, "the answer") {
		t.Fatalf("render:\n%s", got)
	}
	var inv *errs.Invalid
	if _, err := svc.SaveTemplate(ctx, audit.System, org, "default", "Grade {{query}}"); !errors.As(err, &inv) || !strings.Contains(err.Error(), "{{answer}}") {
		t.Fatalf("template without answer: %v", err)
	}
	v2, err := svc.SaveTemplate(ctx, audit.System, org, "default", "Grade this: {{answer}} as JSON")
	if err != nil || v2.Version != 2 {
		t.Fatalf("%+v %v", v2, err)
	}
	if _, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: in}); err != nil {
		t.Fatal(err)
	}
	// The new version is another cache key: the same input is judged again.
	if got := srv.Requests()[0].Last(); got != "Grade this: the answer as JSON" {
		t.Fatalf("prompt %q", got)
	}
	list, err := svc.Templates(ctx, org)
	if err != nil || len(list) != 1 || list[0].Version != 2 {
		t.Fatalf("%+v %v", list, err)
	}
}
