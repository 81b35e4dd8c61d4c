package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/web/webtest"
)

type bestOfNDoc struct {
	Response         string  `json:"response"`
	RewardScore      float64 `json:"reward_score"`
	CandidatesCount  int     `json:"candidates_count"`
	GenerationMethod string  `json:"generation_method"`
	ResponseID       string  `json:"response_id"`
	Selected         int     `json:"selected"`
	Scores           []struct {
		Text     string  `json:"text"`
		Score    float64 `json:"score"`
		Invalid  string  `json:"invalid"`
		Filtered bool    `json:"filtered"`
	} `json:"scores"`
}

// POST /api/best-of-n with four candidates scored by the judge returns the
// highest-scoring one and logs all four under its response id; feedback
// that names the response id as its trace links to it; rules and a
// threshold with filters select as documented; bad requests name fields.
func TestBestOfNAPI(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{})
	org := s.Org("acme")
	admin := s.APIKey(org, "ops", "admin")
	assistant := s.APIKey(org, "assistant", "curator")
	viewer := s.APIKey(org, "dash", "viewer")
	// The judge scores an answer by its number of exclamation marks,
	// tenths: "!!!" is 0.3; one answer it cannot grade.
	judge := chattest.New(func(r chattest.Request) chattest.Reply {
		p := r.Last()
		answer := p[strings.Index(p, "The assistant's answer:\n")+len("The assistant's answer:\n"):]
		answer = answer[:strings.Index(answer, "\n")]
		if strings.Contains(answer, "garbled") {
			return chattest.Reply{Content: "no idea"}
		}
		score := float64(strings.Count(answer, "!")) / 10
		return chattest.Reply{Content: `{"score": ` + strconv.FormatFloat(score, 'f', -1, 64) + `, "safety_flag": false, "critique": "ok"}`}
	})
	t.Cleanup(judge.Close)
	s.API(admin, http.MethodPost, "/api/endpoints", map[string]any{"name": "deepseek", "base_url": judge.URL + "/v1", "model": "deepseek-chat"}).
		Must(t, http.StatusCreated)

	cands := []string{"Reset it!", "Reset the router!!!", "garbled", "Check the cable!!"}
	var out bestOfNDoc
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "My internet is down", "context": map[string]any{"plan": "home"},
		"candidates": cands, "scorer": map[string]any{"judge": "deepseek"}, "selection": "max"}).Must(t, http.StatusOK).JSON(t, &out)
	if out.Response != "Reset the router!!!" || out.RewardScore != 0.3 || out.CandidatesCount != 4 || out.GenerationMethod != "provided" ||
		out.Selected != 1 || out.ResponseID == "" || len(out.Scores) != 4 || out.Scores[2].Invalid == "" || out.Scores[3].Score != 0.2 {
		t.Fatalf("best of four: %+v", out)
	}
	// Feedback on the answer carries its response id as the trace.
	s.API(assistant, http.MethodPost, "/api/feedback", map[string]any{"query": "My internet is down", "response": out.Response,
		"feedback_type": "thumbs_up", "trace_id": out.ResponseID}).Must(t, http.StatusCreated)
	var logged struct {
		Query       string   `json:"query"`
		Selected    int      `json:"selected"`
		Candidates  []any    `json:"candidates"`
		FeedbackIDs []string `json:"feedback_ids"`
	}
	s.API(viewer, http.MethodGet, "/api/best-of-n/"+out.ResponseID, nil).Must(t, http.StatusOK).JSON(t, &logged)
	if logged.Query != "My internet is down" || logged.Selected != 1 || len(logged.Candidates) != 4 || len(logged.FeedbackIDs) != 1 {
		t.Errorf("logged %+v", logged)
	}
	s.API(s.APIKey(s.Org("globex"), "x", "viewer"), http.MethodGet, "/api/best-of-n/"+out.ResponseID, nil).Must(t, http.StatusNotFound)

	// Rules: the forbidden phrase lowers the first; threshold selection
	// takes the first at or above 0.5 that passes the filter.
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "dose?",
		"candidates": []string{"Double the dose.", "Ask your doctor.", "Ask your doctor about a double dose."},
		"scorer":     map[string]any{"rules": []any{map[string]any{"name": "risk", "kind": "forbidden", "phrases": []string{"double"}}}},
		"selection":  "threshold", "threshold": 0.5,
		"filters": []any{map[string]any{"name": "doctor", "kind": "required", "phrases": []string{"doctor"}}},
	}).Must(t, http.StatusOK).JSON(t, &out)
	if out.Response != "Ask your doctor." || out.RewardScore != 1 || !out.Scores[0].Filtered || out.Scores[0].Score != 0 {
		t.Errorf("rules with a threshold: %+v", out)
	}

	var p problemDoc
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "", "candidates": []string{"only one"},
		"scorer": map[string]any{"judge": "deepseek", "rules": []string{"refusal"}}, "selection": "best", "threshold": 2}).
		Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "query,candidates,scorer,selection,threshold" {
		t.Errorf("bad request named %q", p.fields())
	}
	s.API(assistant, http.MethodPost, "/api/best-of-n", map[string]any{"query": "q", "candidates": []string{"a", "b"},
		"scorer": map[string]any{"judge": "nobody"}}).Must(t, http.StatusUnprocessableEntity).JSON(t, &p)
	if p.fields() != "scorer.judge" {
		t.Errorf("unknown judge named %q", p.fields())
	}
	s.API(viewer, http.MethodPost, "/api/best-of-n", map[string]any{"query": "q", "candidates": []string{"a", "b"},
		"scorer": map[string]any{"rules": []string{"refusal"}}}).Must(t, http.StatusForbidden)
}
