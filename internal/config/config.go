// Package config reads Curate's settings from the environment; commands
// override them with their flags.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config holds every setting. Each field names its variable and default.
type Config struct {
	Addr            string        // CURATE_ADDR, ":8080"
	DataDir         string        // CURATE_DATA_DIR, "./.curate"
	BlobURL         string        // CURATE_BLOB_URL, unset: export files in <DataDir>/exports (else e.g. s3://bucket?region=...)
	DatabaseURL     string        // DATABASE_URL, unset: a private cluster in DataDir
	SessionKey      string        // CURATE_SESSION_KEY, unset: generated and kept in DataDir
	SessionTTL      time.Duration // CURATE_SESSION_TTL, 12h
	SecretKey       string        // CURATE_SECRET_KEY, unset: generated and kept in DataDir (see Secret)
	Env             string        // CURATE_ENV, "" or "dev"
	Workers         int           // CURATE_WORKERS, 10 (River workers; 0: web only)
	LogLevel        string        // CURATE_LOG_LEVEL, "info"
	LogFormat       string        // CURATE_LOG_FORMAT, "text" or "json"
	TLSCert         string        // CURATE_TLS_CERT, serve HTTPS with this certificate...
	TLSKey          string        // CURATE_TLS_KEY, ...and key
	BodyLimit       int64         // CURATE_BODY_LIMIT, 2 MiB: the largest request body outside bulk routes
	ShutdownTimeout time.Duration // CURATE_SHUTDOWN_TIMEOUT, 30s
	BatchBodyLimit  int64         // CURATE_BATCH_BODY_LIMIT, 64 MiB: POST /api/feedback/batch
	APIRate         float64       // CURATE_API_RATE, 200: requests per second per API key
	APIBurst        int           // CURATE_API_BURST, 400
	FeedbackPerUser int           // CURATE_FEEDBACK_PER_USER, 10: feedback per minute per end user (user_id)

	// Fine-tuning. Credentials come from the environment only and are
	// never logged, rendered or stored in rows.
	FineTuneBudgetUSD float64       // CURATE_FINETUNE_BUDGET_USD, 100: an organisation's monthly budget until an admin sets one
	FineTunePoll      time.Duration // CURATE_FINETUNE_POLL, 30s: how often a running job is looked at
	OpenAIAPIKey      string        // OPENAI_API_KEY (secret)
	OpenAIBaseURL     string        // OPENAI_BASE_URL, unset: OpenAI's
	BedrockBucket     string        // CURATE_BEDROCK_BUCKET: S3 bucket for training files
	BedrockPrefix     string        // CURATE_BEDROCK_PREFIX, "curate/fine-tuning"
	BedrockRoleARN    string        // CURATE_BEDROCK_ROLE_ARN: the role Bedrock assumes to read the bucket
	BedrockRegion     string        // CURATE_BEDROCK_REGION, unset: AWS_REGION; credentials from the AWS chain
	BedrockEndpoint   string        // CURATE_BEDROCK_ENDPOINT, unset: AWS's
	S3Endpoint        string        // CURATE_S3_ENDPOINT, unset: AWS's (set: path-style addressing)

	// Local training (runs in <DataDir>/runs).
	TrainerPython  string // CURATE_TRAINER_PYTHON, "python3"
	TrainerDir     string // CURATE_TRAINER_DIR, "./trainer" made absolute when it exists, else unset (the installed package)
	TrainerCommand string // CURATE_TRAINER_COMMAND, unset: the bundled trainer; split at spaces, the config path is appended
	GPUSlots       int    // CURATE_GPU_SLOTS, 1: local trainers at once (and workers of the "gpu" queue)
	TrainerDevice  string // CURATE_TRAINER_DEVICE, "auto", "cuda" or "cpu"
}

// FromEnv reads the environment, applying defaults.
func FromEnv() (Config, error) {
	c := Config{
		Addr:            env("CURATE_ADDR", ":8080"),
		DataDir:         env("CURATE_DATA_DIR", "./.curate"),
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		BlobURL:         os.Getenv("CURATE_BLOB_URL"),
		SessionKey:      os.Getenv("CURATE_SESSION_KEY"),
		SecretKey:       os.Getenv("CURATE_SECRET_KEY"),
		Env:             os.Getenv("CURATE_ENV"),
		LogLevel:        env("CURATE_LOG_LEVEL", "info"),
		LogFormat:       env("CURATE_LOG_FORMAT", "text"),
		TLSCert:         os.Getenv("CURATE_TLS_CERT"),
		TLSKey:          os.Getenv("CURATE_TLS_KEY"),
		SessionTTL:      12 * time.Hour,
		Workers:         10,
		BodyLimit:       2 << 20,
		ShutdownTimeout: 30 * time.Second,
		BatchBodyLimit:  64 << 20,
		APIRate:         200,
		APIBurst:        400,
		FeedbackPerUser: 10,

		FineTuneBudgetUSD: 100,
		FineTunePoll:      30 * time.Second,
		OpenAIAPIKey:      os.Getenv("OPENAI_API_KEY"),
		OpenAIBaseURL:     os.Getenv("OPENAI_BASE_URL"),
		BedrockBucket:     os.Getenv("CURATE_BEDROCK_BUCKET"),
		BedrockPrefix:     env("CURATE_BEDROCK_PREFIX", "curate/fine-tuning"),
		BedrockRoleARN:    os.Getenv("CURATE_BEDROCK_ROLE_ARN"),
		BedrockRegion:     os.Getenv("CURATE_BEDROCK_REGION"),
		BedrockEndpoint:   os.Getenv("CURATE_BEDROCK_ENDPOINT"),
		S3Endpoint:        os.Getenv("CURATE_S3_ENDPOINT"),

		TrainerPython:  env("CURATE_TRAINER_PYTHON", "python3"),
		TrainerDir:     os.Getenv("CURATE_TRAINER_DIR"),
		TrainerCommand: os.Getenv("CURATE_TRAINER_COMMAND"),
		GPUSlots:       1,
		TrainerDevice:  env("CURATE_TRAINER_DEVICE", "auto"),
	}
	var err error
	if c.SessionTTL, err = durationEnv("CURATE_SESSION_TTL", c.SessionTTL); err != nil {
		return c, err
	}
	if c.ShutdownTimeout, err = durationEnv("CURATE_SHUTDOWN_TIMEOUT", c.ShutdownTimeout); err != nil {
		return c, err
	}
	if c.Workers, err = intEnv("CURATE_WORKERS", c.Workers); err != nil {
		return c, err
	}
	limit, err := intEnv("CURATE_BODY_LIMIT", int(c.BodyLimit))
	if err != nil {
		return c, err
	}
	c.BodyLimit = int64(limit)
	batch, err := intEnv("CURATE_BATCH_BODY_LIMIT", int(c.BatchBodyLimit))
	if err != nil {
		return c, err
	}
	c.BatchBodyLimit = int64(batch)
	if c.APIBurst, err = intEnv("CURATE_API_BURST", c.APIBurst); err != nil {
		return c, err
	}
	if c.FeedbackPerUser, err = intEnv("CURATE_FEEDBACK_PER_USER", c.FeedbackPerUser); err != nil {
		return c, err
	}
	if c.TrainerDir == "" {
		c.TrainerDir = defaultTrainerDir()
	}
	if c.GPUSlots, err = intEnv("CURATE_GPU_SLOTS", c.GPUSlots); err != nil {
		return c, err
	}
	if c.FineTunePoll, err = durationEnv("CURATE_FINETUNE_POLL", c.FineTunePoll); err != nil {
		return c, err
	}
	if v := os.Getenv("CURATE_FINETUNE_BUDGET_USD"); v != "" {
		if c.FineTuneBudgetUSD, err = strconv.ParseFloat(v, 64); err != nil || c.FineTuneBudgetUSD < 0 {
			return c, fmt.Errorf("CURATE_FINETUNE_BUDGET_USD must be a number of dollars, at least 0")
		}
	}
	if v := os.Getenv("CURATE_API_RATE"); v != "" {
		if c.APIRate, err = strconv.ParseFloat(v, 64); err != nil {
			return c, fmt.Errorf("CURATE_API_RATE: %w", err)
		}
	}
	return c, c.Validate()
}

// Validate checks values that would otherwise fail later and less clearly.
func (c Config) Validate() error {
	if c.Env != "" && c.Env != "dev" {
		return fmt.Errorf("CURATE_ENV must be empty or \"dev\", not %q", c.Env)
	}
	if c.Workers < 0 || c.Workers > 1000 {
		return fmt.Errorf("workers must be 0 to 1000, not %d", c.Workers)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("set both CURATE_TLS_CERT and CURATE_TLS_KEY, or neither")
	}
	if c.SessionTTL < time.Minute {
		return fmt.Errorf("CURATE_SESSION_TTL must be at least 1m")
	}
	if c.APIRate <= 0 || c.APIBurst < 1 || c.FeedbackPerUser < 1 {
		return fmt.Errorf("CURATE_API_RATE, CURATE_API_BURST and CURATE_FEEDBACK_PER_USER must be positive")
	}
	if c.BodyLimit < 1024 {
		return fmt.Errorf("CURATE_BODY_LIMIT must be at least 1024 bytes")
	}
	if c.GPUSlots < 0 || c.GPUSlots > 64 {
		return fmt.Errorf("CURATE_GPU_SLOTS must be 1 to 64, not %d", c.GPUSlots)
	}
	switch c.TrainerDevice {
	case "", "auto", "cuda", "cpu":
	default:
		return fmt.Errorf("CURATE_TRAINER_DEVICE must be auto, cuda or cpu, not %q", c.TrainerDevice)
	}
	switch strings.ToLower(c.LogFormat) {
	case "text", "json":
	default:
		return fmt.Errorf("CURATE_LOG_FORMAT must be text or json")
	}
	return nil
}

// defaultTrainerDir is the bundled trainer beside the working directory,
// so `curate serve` run from a checkout finds it; "" when there is none.
func defaultTrainerDir() string {
	dir, err := filepath.Abs("trainer")
	if err != nil {
		return ""
	}
	if info, err := os.Stat(filepath.Join(dir, "curate_trainer")); err != nil || !info.IsDir() {
		return ""
	}
	return dir
}

// Dev reports whether dev mode (demo data, printed credentials) is on.
func (c Config) Dev() bool { return c.Env == "dev" }

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func durationEnv(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func intEnv(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}
