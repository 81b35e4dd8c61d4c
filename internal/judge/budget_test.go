package judge_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/scorers"
)

// spending reads the month's row of the budget and the reservations left.
func spending(t *testing.T, pool *pgxpool.Pool, org uuid.UUID) (spent, reserved int64, open int) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(spent_micros), 0)::bigint, coalesce(sum(reserved_micros), 0)::bigint FROM judge_spending WHERE org_id = $1`,
		org).Scan(&spent, &reserved); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM judge_reservations WHERE org_id = $1`, org).Scan(&open); err != nil {
		t.Fatal(err)
	}
	return spent, reserved, open
}

// judgeAll asks the judge about n different answers at once and returns
// how many were refused for the budget.
func judgeAll(t *testing.T, svc *judge.Service, org uuid.UUID, endpoint string, n int) (refused int) {
	t.Helper()
	var wg sync.WaitGroup
	var count atomic.Int64
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := svc.Judge(context.Background(), org, judge.Request{Endpoint: endpoint, Purpose: "race",
				Input: scorers.Input{Query: "Is the router reset?", Answer: fmt.Sprintf("Answer number %02d.", i)}})
			var budget *judge.BudgetError
			switch {
			case errors.As(err, &budget):
				count.Add(1)
			case err != nil:
				t.Errorf("judgement %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(count.Load())
}

// Twenty judge calls at once against a budget with room for three make
// three calls when each call's estimate is what it costs, and never more
// than four when estimates exceed costs (an answer is priced at its
// 1,024-token cap before it is sent). The others are refused as over the
// budget; nothing stays reserved; the month's spending is what the calls
// cost. Before reservations the twenty all passed the check and all were
// sent.
func TestJudgeBudgetRace(t *testing.T) {
	ctx := context.Background()
	// The judge is priced at $0.27 per million prompt tokens and $1.10
	// per million answer tokens: 380 micros for a 1,000-token prompt and
	// a 100-token answer.
	cases := []struct {
		name string
		// exact: the stand-in bills the prompt as the estimate counts it
		// (its bytes plus 16) and the judge "exact" charges nothing for
		// answers, so estimate = cost.
		exact    bool
		room     float64 // the budget, in calls
		maxCalls int
	}{
		{"estimates are costs", true, 3, 3},
		{"estimates are costs, room for two and a half", true, 2.5, 3},
		{"estimates exceed costs", false, 3, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var perCall atomic.Int64
			svc, org, srv := setup(t, func(r chattest.Request) chattest.Reply {
				time.Sleep(30 * time.Millisecond) // calls overlap
				reply := chattest.Reply{Content: `{"score": 0.5, "safety_flag": false, "critique": "ok"}`, PromptTokens: 1000, CompletionTokens: 100}
				if c.exact {
					reply.PromptTokens, reply.CompletionTokens = int64(len(r.Last()))+16, 0
				}
				perCall.Store(int64(pricing.Cost(reply.PromptTokens, 0.27) + pricing.Cost(reply.CompletionTokens, 1.10)))
				return reply
			})
			pool := svc.Pool
			endpoint := "deepseek"
			if c.exact {
				endpoint = "exact"
				if _, err := svc.Endpoints.Create(ctx, audit.System, org, endpoints.NewEndpoint{Name: endpoint, BaseURL: srv.URL + "/v1", Model: "deepseek-chat",
					PricePerMillionInput: 0.27}); err != nil {
					t.Fatal(err)
				}
			}
			// One call, to learn its cost (every prompt has the same length).
			if _, err := svc.Judge(ctx, org, judge.Request{Endpoint: endpoint, Input: scorers.Input{Query: "Is the router reset?", Answer: "Answer number 99."}}); err != nil {
				t.Fatal(err)
			}
			cost := perCall.Load()
			spent0, _, _ := spending(t, pool, org)
			budget := pricing.Micros(spent0 + int64(c.room*float64(cost)))
			if err := svc.SetBudget(ctx, audit.System, org, budget); err != nil {
				t.Fatal(err)
			}
			before := srv.Calls()
			refused := judgeAll(t, svc, org, endpoint, 20)
			calls := srv.Calls() - before
			t.Logf("%d calls sent, %d refused, for room for %.1f calls of %d micros", calls, refused, c.room, cost)
			if calls > c.maxCalls || calls < 1 || refused != 20-calls {
				t.Errorf("%d calls sent and %d refused for room for %.1f calls, want at most %d sent and the rest refused", calls, refused, c.room, c.maxCalls)
			}
			spent, reserved, open := spending(t, pool, org)
			if spent != spent0+int64(calls)*cost || reserved != 0 || open != 0 {
				t.Errorf("spent %d (want %d), %d reserved in %d reservations", spent, spent0+int64(calls)*cost, reserved, open)
			}
			b, err := svc.Budget(ctx, org)
			if err != nil || int64(b.Spent) != spent {
				t.Errorf("the usage log says %d spent, the budget's month %d (%v)", b.Spent, spent, err)
			}
		})
	}
}

// A process killed between reserving and settling leaves its reservation
// holding money; once expired it is given back, and a call refused for it
// goes through. A call that fails releases its reservation at once.
func TestJudgeReservationExpires(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
		if fail.Load() {
			return chattest.Reply{Status: 500}
		}
		return chattest.Reply{Content: `{"score": 0.5, "safety_flag": false, "critique": "ok"}`, PromptTokens: 1000, CompletionTokens: 100}
	})
	pool := svc.Pool
	if err := svc.SetBudget(ctx, audit.System, org, pricing.Dollars(0.01)); err != nil {
		t.Fatal(err)
	}
	ask := func(answer string) error {
		_, err := svc.Judge(ctx, org, judge.Request{Endpoint: "deepseek", Input: scorers.Input{Query: "q", Answer: answer}})
		return err
	}
	if err := ask("first"); err != nil {
		t.Fatal(err)
	}
	// A dead process's reservation holds the whole budget, and expired a
	// second ago.
	month := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `UPDATE judge_spending SET reserved_micros = reserved_micros + 10000 WHERE org_id = $1 AND month = $2`, org, month); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO judge_reservations (org_id, month, micros, expires_at) VALUES ($1, $2, 10000, now() - interval '1 second')`, org, month); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ask("second") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the dead reservation expired: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call still waits for a reservation that expired")
	}
	if _, reserved, open := spending(t, pool, org); reserved != 0 || open != 0 {
		t.Errorf("%d reserved in %d reservations after the expired one was given back", reserved, open)
	}
	// A failed call leaves nothing reserved.
	fail.Store(true)
	if err := ask("third"); err == nil {
		t.Fatal("the failing judge answered")
	}
	spent, reserved, open := spending(t, pool, org)
	if reserved != 0 || open != 0 || spent != 2*380 {
		t.Errorf("after a failed call: %d spent, %d reserved in %d reservations", spent, reserved, open)
	}
	if srv.Calls() < 3 {
		t.Errorf("%d calls", srv.Calls())
	}
}
