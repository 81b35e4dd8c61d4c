package judge_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/endpoints"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/scorers"
)

// The RAG metrics reproduce the worked examples of RAGAS's documentation
// (docs/concepts/metrics/available_metrics/*.md in explodinggradients/ragas,
// December 2025): the stand-in judge answers the verdicts the documentation
// shows, and the score is computed from them as RAGAS computes it.
func TestRAGMetricsReproduceRAGAS(t *testing.T) {
	ctx := context.Background()
	einsteinContext := []string{"Albert Einstein (born 14 March 1879) was a German-born theoretical physicist, widely held to be one of the greatest and most influential scientists of all time"}
	cases := []struct {
		name    string
		metric  string
		in      scorers.Input
		replies []string // the judge's answers, in the order asked
		want    float64  // RAGAS's documented value
	}{
		{
			// faithfulness.md, "How It's Calculated": the low-faithfulness
			// answer has two statements, the first supported: 1/2.
			name: "faithfulness, Einstein's low-faithfulness answer", metric: judge.RAGFaithfulness,
			in: scorers.Input{Query: "Where and when was Einstein born?", Context: einsteinContext,
				Answer: "Einstein was born in Germany on 20th March 1879."},
			replies: []string{
				`{"statements": ["Einstein was born in Germany.", "Einstein was born on 20th March 1879."]}`,
				`{"statements": [{"statement": "Einstein was born in Germany.", "reason": "German-born", "verdict": 1},
				  {"statement": "Einstein was born on 20th March 1879.", "reason": "The context says 14 March", "verdict": 0}]}`,
			},
			want: 0.5,
		},
		{
			// faithfulness.md, the example's output: 1.0.
			name: "faithfulness, the first Super Bowl", metric: judge.RAGFaithfulness,
			in: scorers.Input{Query: "When was the first super bowl?", Answer: "The first superbowl was held on Jan 15, 1967",
				Context: []string{"The First AFL–NFL World Championship Game was an American football game played on January 15, 1967, at the Los Angeles Memorial Coliseum in Los Angeles."}},
			replies: []string{
				`{"statements": ["The first superbowl was held on Jan 15, 1967."]}`,
				`{"statements": [{"statement": "The first superbowl was held on Jan 15, 1967.", "reason": "Played on January 15, 1967", "verdict": 1}]}`,
			},
			want: 1.0,
		},
		{
			// context_precision.md: the relevant document first, 0.9999999999.
			name: "context precision, relevant document first", metric: judge.RAGContextPrecision,
			in: scorers.Input{Query: "Where is the Eiffel Tower located?", Reference: "The Eiffel Tower is located in Paris.",
				Context: []string{"The Eiffel Tower is located in Paris.", "The Brandenburg Gate is located in Berlin."}},
			replies: []string{`{"reason": "It states the location", "verdict": 1}`, `{"reason": "About Berlin", "verdict": 0}`},
			want:    0.9999999999,
		},
		{
			// context_precision.md: the irrelevant document first, 0.49999999995.
			name: "context precision, irrelevant document first", metric: judge.RAGContextPrecision,
			in: scorers.Input{Query: "Where is the Eiffel Tower located?", Reference: "The Eiffel Tower is located in Paris.",
				Context: []string{"The Brandenburg Gate is located in Berlin.", "The Eiffel Tower is located in Paris."}},
			replies: []string{`{"reason": "About Berlin", "verdict": 0}`, `{"reason": "It states the location", "verdict": 1}`},
			want:    0.49999999995,
		},
		{
			// context_recall.md: the reference's one statement is attributed: 1.0.
			name: "context recall, the Eiffel Tower", metric: judge.RAGContextRecall,
			in: scorers.Input{Query: "Where is the Eiffel Tower located?", Context: []string{"Paris is the capital of France."},
				Reference: "The Eiffel Tower is located in Paris.", Answer: "The Eiffel Tower is located in Paris."},
			replies: []string{`{"statements": [{"statement": "The Eiffel Tower is located in Paris.", "reason": "Paris is named", "verdict": 1}]}`},
			want:    1.0,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var n int
			svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
				n++
				if n > len(c.replies) {
					t.Errorf("asked %d times; the example has %d answers", n, len(c.replies))
					return chattest.Reply{Status: 500}
				}
				return chattest.Reply{Content: c.replies[n-1], PromptTokens: 100, CompletionTokens: 20}
			})
			got, err := svc.RAG(ctx, org, judge.RAGRequest{Metric: c.metric, Endpoint: "deepseek", Input: c.in, Purpose: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Invalid != "" || math.Abs(got.Score-c.want) > 1e-4 {
				t.Fatalf("score %v (invalid %q), RAGAS documents %v; explanation:\n%s", got.Score, got.Invalid, c.want, got.Critique)
			}
			if got.Calls != len(c.replies) || srv.Calls() != len(c.replies) || got.Cost == 0 {
				t.Fatalf("%d calls logged, %d made, cost %d; want %d", got.Calls, srv.Calls(), got.Cost, len(c.replies))
			}
			again, err := svc.RAG(ctx, org, judge.RAGRequest{Metric: c.metric, Endpoint: "deepseek", Input: c.in, Purpose: "test"})
			if err != nil || !again.Cached || again.Score != got.Score || srv.Calls() != len(c.replies) {
				t.Fatalf("asked again: %+v %v, %d calls", again, err, srv.Calls())
			}
			b, err := svc.Budget(ctx, org)
			if err != nil || b.Calls != int64(len(c.replies)) || b.Spent != got.Cost {
				t.Fatalf("budget %+v %v; the metric's calls cost %d", b, err, got.Cost)
			}
		})
	}
}

// AveragePrecision against hand calculations: RAGAS's formula is
// Σₖ precision@k · vₖ over the number of relevant documents.
func TestAveragePrecision(t *testing.T) {
	for _, c := range []struct {
		v    []int
		want float64
	}{
		{[]int{1, 0}, 1},
		{[]int{0, 1}, 0.5},
		{[]int{0, 0, 1, 1, 0}, (1.0/3 + 2.0/4) / 2}, // 0.4167
		{[]int{1, 0, 1}, (1 + 2.0/3) / 2},
		{[]int{0, 0}, 0},
	} {
		if got := judge.AveragePrecision(c.v); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("AveragePrecision(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// Answer relevancy is the mean cosine similarity between the question's
// embedding and those of the questions the judge writes from the answer,
// and 0 for a noncommittal answer (RAGAS's answer_relevance.md). The
// stand-in embeds each text as a fixed vector, so the mean is worked by
// hand: cos = 1, 0.6 and 0.8, mean 0.8.
func TestAnswerRelevancy(t *testing.T) {
	ctx := context.Background()
	noncommittal := 0
	svc, org, srv := setup(t, func(chattest.Request) chattest.Reply {
		return chattest.Reply{Content: `{"questions": ["Where is France?", "In which part of Europe is France?", "What region is France in?"], "noncommittal": ` +
			strconv.Itoa(noncommittal) + `}`}
	})
	vectors := map[string][]float64{
		"Where is France and what is it's capital?": {1, 0},
		"Where is France?":                          {2, 0},
		"In which part of Europe is France?":        {0.6, 0.8},
		"What region is France in?":                 {4, 3},
	}
	var embedded [][]string
	srv.Embed = func(model string, input []string) [][]float64 {
		if model != "text-embedding-3-small" {
			t.Errorf("embedded with %q", model)
		}
		embedded = append(embedded, input)
		out := make([][]float64, len(input))
		for i, s := range input {
			out[i] = vectors[s]
		}
		return out
	}
	if _, err := svc.Endpoints.Create(ctx, audit.System, org, endpoints.NewEndpoint{Name: "embed", BaseURL: srv.URL + "/v1",
		Model: "text-embedding-3-small", PricePerMillionInput: 0.02}); err != nil {
		t.Fatal(err)
	}
	in := scorers.Input{Query: "Where is France and what is it's capital?", Answer: "France is in western Europe."}
	got, err := svc.RAG(ctx, org, judge.RAGRequest{Metric: judge.RAGAnswerRelevancy, Endpoint: "deepseek", Embeddings: "embed", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if got.Invalid != "" || math.Abs(got.Score-0.8) > 1e-12 || got.Calls != 2 {
		t.Fatalf("judgement %+v", got)
	}
	if len(embedded) != 1 || len(embedded[0]) != 4 || embedded[0][0] != in.Query {
		t.Fatalf("embedded %q", embedded)
	}
	if !strings.Contains(got.Critique, "similarity 0.6000") {
		t.Fatalf("explanation does not show each similarity:\n%s", got.Critique)
	}
	noncommittal = 1
	in.Answer = "I am not sure."
	got, err = svc.RAG(ctx, org, judge.RAGRequest{Metric: judge.RAGAnswerRelevancy, Endpoint: "deepseek", Embeddings: "embed", Input: in})
	if err != nil || got.Invalid != "" || got.Score != 0 {
		t.Fatalf("noncommittal answer: %+v %v", got, err)
	}
}

// An item a metric cannot score is invalid with the reason, and no judge
// is asked; a malformed verdict list is invalid, never a score.
func TestRAGInvalid(t *testing.T) {
	ctx := context.Background()
	svc, org, srv := setup(t, func(r chattest.Request) chattest.Reply {
		if strings.Contains(r.Last(), "Split the answer") {
			return chattest.Reply{Content: `{"statements": ["One.", "Two."]}`}
		}
		return chattest.Reply{Content: `{"statements": [{"statement": "One.", "reason": "", "verdict": 1}]}`}
	})
	for metric, in := range map[string]scorers.Input{
		judge.RAGFaithfulness:     {Query: "q", Answer: "a"},
		judge.RAGContextRecall:    {Query: "q", Answer: "a", Context: []string{"doc"}},
		judge.RAGContextPrecision: {Query: "q", Answer: "a"},
	} {
		got, err := svc.RAG(ctx, org, judge.RAGRequest{Metric: metric, Endpoint: "deepseek", Input: in})
		if err != nil || got.Invalid == "" || got.AsScore().Valid() {
			t.Fatalf("%s on %+v: %+v %v", metric, in, got, err)
		}
	}
	if srv.Calls() != 0 {
		t.Fatalf("%d judge calls for items that cannot be scored", srv.Calls())
	}
	got, err := svc.RAG(ctx, org, judge.RAGRequest{Metric: judge.RAGFaithfulness, Endpoint: "deepseek",
		Input: scorers.Input{Query: "q", Answer: "One. Two.", Context: []string{"doc"}}})
	if err != nil || !strings.Contains(got.Invalid, "1 verdicts for 2 statements") {
		t.Fatalf("one verdict for two claims: %+v %v", got, err)
	}
}
