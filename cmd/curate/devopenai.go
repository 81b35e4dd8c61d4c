//go:build dev

package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/provider/openaitest"
)

// devOpenAI starts the stand-in for OpenAI's fine-tuning API and points
// cfg at it, so dev mode shows a job running without a paid key. Only a
// binary built with -tags dev (make run) has it. Jobs are polled every two
// seconds unless CURATE_FINETUNE_POLL says otherwise, so one finishes in
// about forty seconds. The returned func stops the stand-in.
func devOpenAI(cfg *config.Config, log *slog.Logger) (func(), error) {
	fake, err := openaitest.Start(openaitest.WithScript(openaitest.DevScript()))
	if err != nil {
		return nil, fmt.Errorf("starting the fine-tuning stand-in: %w", err)
	}
	cfg.OpenAIBaseURL, cfg.OpenAIAPIKey = fake.URL(), "sk-curate-dev-fake"
	if _, set := os.LookupEnv("CURATE_FINETUNE_POLL"); !set {
		cfg.FineTunePoll = 2 * time.Second
	}
	log.Info("OPENAI_API_KEY is unset: OpenAI fine-tuning jobs go to the built-in stand-in", "url", fake.URL(), "poll", cfg.FineTunePoll)
	return fake.Close, nil
}
