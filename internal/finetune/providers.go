package finetune

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/bedrock"
	"github.com/curate/curate/internal/provider/local"
	"github.com/curate/curate/internal/provider/openai"
)

// OpenAI is the registry entry for OpenAI: supervised jobs on chat
// examples, DPO on preference pairs.
func OpenAI(cfg openai.Config) Entry {
	return Entry{
		Label: "OpenAI",
		New:   func(context.Context) (provider.Provider, error) { return openai.New(cfg) },
		Formats: map[provider.Method]export.Format{
			provider.Supervised: export.OpenAIChat,
			provider.DPO:        export.OpenAIPreference,
		},
		AutoEpochs: openai.AutoEpochs,
		Spelling:   openai.Spelling,
		// The model of OpenAI's own fine-tuning example, which takes both
		// supervised and DPO training.
		DefaultModel: "gpt-4o-mini-2024-07-18",
	}
}

// Bedrock is the registry entry for Amazon Bedrock: supervised jobs on
// Bedrock's chat format.
func Bedrock(cfg bedrock.Config) Entry {
	return Entry{
		Label:      "Amazon Bedrock",
		New:        func(ctx context.Context) (provider.Provider, error) { return bedrock.New(ctx, cfg) },
		Formats:    map[provider.Method]export.Format{provider.Supervised: export.BedrockChat},
		AutoEpochs: BedrockAutoEpochs,
		Spelling:   bedrock.Spelling,
		// The one model Curate fine-tunes at Bedrock.
		DefaultModel: "anthropic.claude-3-haiku-20240307-v1:0:200k",
		NoSeed:       true,
	}
}

// Local is the registry entry for training on this machine with the
// bundled trainer: chat examples for sft, and as prompts for irs, grpo and
// ppo; TRL preference pairs for dpo and reward. It costs nothing and takes
// no price.
func Local(cfg local.Config) Entry {
	return Entry{
		Label: "Local GPU",
		New:   func(context.Context) (provider.Provider, error) { return local.New(cfg) },
		Formats: map[provider.Method]export.Format{
			provider.Supervised: export.OpenAIChat,
			provider.DPO:        export.TRLPreference,
			local.Reward:        export.TRLPreference,
			local.IRS:           export.OpenAIChat,
			local.GRPO:          export.OpenAIChat,
			local.PPO:           export.OpenAIChat,
		},
		AutoEpochs:   func(int) int { return 1 }, // the trainer's default (trainer/README.md)
		MethodEpochs: map[provider.Method]int{local.Reward: local.DefaultEpochs(local.Reward)},
		Free:         true,
	}
}

// Aliases are other names for Curate's providers, as the seed's
// fine_tuning_jobs.provider spells them: Anthropic's models are
// fine-tuned at Amazon Bedrock, and HuggingFace models train on the local
// trainer (transformers, peft and TRL).
var Aliases = map[string]string{"anthropic": bedrock.Name, "huggingface": local.Name}

// Resolve returns the provider a name stands for: the name itself when it
// is one of r's, its alias's provider when that is one of r's, or else
// the name unchanged (which Estimate refuses).
func (r Providers) Resolve(name string) string {
	if _, ok := r[name]; ok {
		return name
	}
	if n, ok := Aliases[name]; ok {
		if _, ok := r[n]; ok {
			return n
		}
	}
	return name
}

// LocalConfig is the local provider's configuration from cfg: runs under
// <data dir>/runs, models from CURATE_MODELS_DIR (<data dir>/models when
// unset), the trainer and its slots from the environment.
func LocalConfig(cfg config.Config) local.Config {
	models := cfg.ModelsDir
	if models == "" {
		models = filepath.Join(cfg.DataDir, "models")
	}
	return local.Config{RunsRoot: filepath.Join(cfg.DataDir, "runs"), ModelsDir: models, Python: cfg.TrainerPython, TrainerDir: cfg.TrainerDir,
		Command: strings.Fields(cfg.TrainerCommand), Slots: cfg.GPUSlots, Device: cfg.TrainerDevice}
}

// New builds the service with OpenAI, Bedrock and local training
// configured from cfg. A provider whose settings are missing stays listed
// and says what is missing when a launch names it. jobs starts each job's
// worker, data reads the frozen dataset versions jobs train on, registry
// registers what a succeeded job trained (nil registers nothing), workers
// lists the live workers a local launch needs (nil checks none), and log
// receives the detail of failed jobs.
func New(pool *pgxpool.Pool, cfg config.Config, jobs jobq.Inserter, data DataSource, registry *models.Service, workers WorkerSource,
	log *slog.Logger) *Service {
	bc := bedrock.Config{Bucket: cfg.BedrockBucket, Prefix: cfg.BedrockPrefix, RoleARN: cfg.BedrockRoleARN,
		Region: cfg.BedrockRegion, BedrockEndpoint: cfg.BedrockEndpoint, S3Endpoint: cfg.S3Endpoint, S3PathStyle: cfg.S3Endpoint != ""}
	return &Service{
		Pool: pool,
		Providers: Providers{
			openai.Name:  OpenAI(openai.Config{APIKey: cfg.OpenAIAPIKey, BaseURL: cfg.OpenAIBaseURL}),
			bedrock.Name: Bedrock(bc),
			local.Name:   Local(LocalConfig(cfg)),
		},
		Jobs:          jobs,
		Dir:           filepath.Join(cfg.DataDir, "fine-tuning"),
		DefaultBudget: pricing.Dollars(cfg.FineTuneBudgetUSD),
		PollEvery:     cfg.FineTunePoll,
		Registry:      registry,
		Workers:       workers,
		Log:           log,
		TrainerAPI:    cfg.TrainerAPI(),
		data:          data,
	}
}
