//go:build !dev

package main

import (
	"log/slog"

	"github.com/curate/curate/internal/config"
)

// devOpenAI says that OpenAI fine-tuning needs OPENAI_API_KEY: the
// stand-in dev mode can send jobs to is linked only into binaries built
// with -tags dev (make run), never into one built for production.
func devOpenAI(_ *config.Config, log *slog.Logger) (func(), error) {
	log.Info("OPENAI_API_KEY is unset: OpenAI fine-tuning is unavailable (the stand-in for it is in builds with -tags dev, as make run builds)")
	return func() {}, nil
}
