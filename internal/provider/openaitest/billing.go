package openaitest

import (
	"bufio"
	"bytes"
	"encoding/json"

	"github.com/curate/curate/internal/provider/openai"
	"github.com/curate/curate/internal/tokens"
)

// trainedTokens is what OpenAI bills a finished job: the tokens of its
// training file times the epochs it ran (its pricing page: "tokens in your
// training file × number of epochs"). The validation file is not billed.
// A DPO line holds its prompt once and both replies, and is counted as it
// stands. Each message is counted as the chat framing has it (three tokens
// plus its role and content) and each example's reply is primed once, as
// OpenAI's cookbook counts a conversation.
func trainedTokens(model string, training []byte, epochs int) int64 {
	_, perEpoch := countTraining(model, training)
	return perEpoch * int64(epochs)
}

// countTraining returns the examples in a training file and their tokens.
// Lines that do not parse count nothing: the fake bills what it could read.
func countTraining(model string, training []byte) (examples int, total int64) {
	counter, err := tokens.New(tokens.ModelInfo(model).Encoding)
	if err != nil {
		return 0, 0
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Name    string `json:"name"`
	}
	var line struct {
		Messages []message `json:"messages"`
		Input    struct {
			Messages []message `json:"messages"`
		} `json:"input"`
		Preferred    []message `json:"preferred_output"`
		NonPreferred []message `json:"non_preferred_output"`
	}
	sc := bufio.NewScanner(bytes.NewReader(training))
	sc.Buffer(make([]byte, 0, 64<<10), maxUpload)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		line.Messages, line.Input.Messages, line.Preferred, line.NonPreferred = nil, nil, nil, nil
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		var msgs []tokens.Message
		for _, part := range [][]message{line.Messages, line.Input.Messages, line.Preferred, line.NonPreferred} {
			for _, m := range part {
				msgs = append(msgs, tokens.Message{Role: m.Role, Content: m.Content, Name: m.Name})
			}
		}
		total += int64(counter.CountMessages(msgs))
		examples++
	}
	return examples, total
}

// autoEpochs is the epochs a job runs when its request leaves n_epochs
// "auto": the script's, when it names some, or else OpenAI's own rule for
// the training file's size.
func (s *Server) autoEpochs(model, trainingFile string) int {
	if s.script.Epochs > 0 {
		return s.script.Epochs
	}
	var n int
	if f, ok := s.files[trainingFile]; ok {
		n, _ = countTraining(model, f.content)
	}
	return openai.AutoEpochs(n)
}
