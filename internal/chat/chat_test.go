package chat_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/curate/curate/internal/chat"
	"github.com/curate/curate/internal/chat/chattest"
	"github.com/curate/curate/internal/outbound"
)

func client(s *chattest.Server) *chat.Client {
	policy, _ := outbound.ParsePolicy("127.0.0.1")
	oc := &outbound.Client{Policy: policy, Timeout: 300 * time.Millisecond}
	return &chat.Client{HTTP: oc.HTTP(), BaseURL: s.URL + "/v1", APIKey: "sk-test", Attempts: 3, BaseDelay: time.Millisecond}
}

func TestComplete(t *testing.T) {
	s := chattest.New(func(r chattest.Request) chattest.Reply {
		return chattest.Reply{Content: "Paris.", PromptTokens: 12, CompletionTokens: 3}
	})
	defer s.Close()
	temp := 0.0
	got, err := client(s).Complete(context.Background(), chat.Request{Model: "m", Temperature: &temp, MaxTokens: 64, JSON: true,
		Messages: []chat.Message{{Role: "user", Content: "Capital of France?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "Paris." || got.PromptTokens != 12 || got.CompletionTokens != 3 || got.Tries != 1 {
		t.Fatalf("got %+v", got)
	}
	req := s.Requests()[0]
	if req.Authorization != "Bearer sk-test" || req.ResponseFormat == nil || req.ResponseFormat.Type != "json_object" ||
		req.MaxTokens != 64 || req.Temperature == nil || *req.Temperature != 0 || req.Last() != "Capital of France?" {
		t.Fatalf("request %+v", req)
	}
}

func TestCompleteRetries(t *testing.T) {
	var n atomic.Int64
	cases := []struct {
		name   string
		script func(chattest.Request) chattest.Reply
		calls  int
		want   string // Describe of the error, "" for success
	}{
		{"429 then answer", func(chattest.Request) chattest.Reply {
			if n.Add(1) < 3 {
				return chattest.Reply{Status: http.StatusTooManyRequests}
			}
			return chattest.Reply{Content: "ok"}
		}, 3, ""},
		{"500 storm gives up", func(chattest.Request) chattest.Reply { return chattest.Reply{Status: 500} }, 3, "The server answered 500 Internal Server Error."},
		{"timeout gives up", func(chattest.Request) chattest.Reply { return chattest.Reply{Hang: true} }, 3, "The server did not answer in time."},
		{"400 not retried", func(chattest.Request) chattest.Reply { return chattest.Reply{Status: 400} }, 1, "The server answered 400 Bad Request."},
		{"malformed not retried", func(chattest.Request) chattest.Reply { return chattest.Reply{Raw: "<html>oops"} }, 1, "The answer was not a chat completion."},
		{"empty not retried", func(chattest.Request) chattest.Reply { return chattest.Reply{Content: "  "} }, 1, "The answer had no text."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n.Store(0)
			s := chattest.New(c.script)
			defer s.Close()
			_, err := client(s).Complete(context.Background(), chat.Request{Model: "m", Messages: []chat.Message{{Role: "user", Content: "hi"}}})
			if got := outbound.Describe(err); got != c.want {
				t.Fatalf("error %q (%v), want %q", got, err, c.want)
			}
			if s.Calls() != c.calls {
				t.Fatalf("%d calls, want %d", s.Calls(), c.calls)
			}
		})
	}
	var answer *chat.AnswerError
	if !errors.As(chat.ErrEmpty, &answer) {
		t.Fatal("ErrEmpty is not an AnswerError")
	}
}

func TestEmbed(t *testing.T) {
	s := chattest.New(nil)
	s.Embed = func(model string, input []string) [][]float64 {
		out := make([][]float64, len(input))
		for i := range input {
			out[i] = []float64{float64(i), 1}
		}
		return out
	}
	defer s.Close()
	got, err := client(s).Embed(context.Background(), "emb", []string{"one two", "three"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Vectors) != 2 || got.Vectors[1][0] != 1 || got.PromptTokens != 3 || got.Tries != 1 {
		t.Fatalf("got %+v", got)
	}
	s.Embed = func(string, []string) [][]float64 { return [][]float64{{1}} }
	if _, err := client(s).Embed(context.Background(), "emb", []string{"a", "b"}); !errors.Is(err, chat.ErrNotEmbeddings) {
		t.Fatalf("one vector for two texts: err %v, want ErrNotEmbeddings", err)
	}
}
