// Package config reads Curate's settings from the environment; commands
// override them with their flags.
package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/curate/curate/internal/outbound"
)

// Config holds every setting. Each field's tags name its environment
// variable and its default, so serve, the worker, the CLI and the tests
// (through Defaults) start from the same values; the comment says what an
// unset variable means where that is not a plain default.
type Config struct {
	Addr            string        `env:"CURATE_ADDR" envDefault:":8080"`
	DataDir         string        `env:"CURATE_DATA_DIR" envDefault:"./.curate"`
	BlobURL         string        `env:"CURATE_BLOB_URL"`    // unset: export files and uploads in <DataDir>/exports (else e.g. s3://bucket?region=... or file:///shared/dir)
	DatabaseURL     string        `env:"DATABASE_URL"`       // unset: a private cluster in DataDir
	SessionKey      string        `env:"CURATE_SESSION_KEY"` // unset: generated and kept in DataDir
	SessionTTL      time.Duration `env:"CURATE_SESSION_TTL" envDefault:"12h"`
	SecretKey       string        `env:"CURATE_SECRET_KEY"`              // unset: generated and kept in DataDir (see Secret)
	Env             string        `env:"CURATE_ENV"`                     // "" or "dev"
	Workers         int           `env:"CURATE_WORKERS" envDefault:"10"` // River workers; 0: web only
	LogLevel        string        `env:"CURATE_LOG_LEVEL" envDefault:"info"`
	LogFormat       string        `env:"CURATE_LOG_FORMAT" envDefault:"text"`    // "text" or "json"
	TLSCert         string        `env:"CURATE_TLS_CERT"`                        // serve HTTPS with this certificate...
	TLSKey          string        `env:"CURATE_TLS_KEY"`                         // ...and key
	BodyLimit       int64         `env:"CURATE_BODY_LIMIT" envDefault:"2097152"` // 2 MiB: the largest request body outside bulk routes
	ShutdownTimeout time.Duration `env:"CURATE_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	BatchBodyLimit  int64         `env:"CURATE_BATCH_BODY_LIMIT" envDefault:"67108864"` // 64 MiB: POST /api/feedback/batch
	// BodyReadTimeout bounds the reading of a request, headers and body;
	// a body keeps being read past it while it arrives at BodyMinRate
	// bytes per second or more on average, so slow bulk uploads go through
	// while a client trickling bytes cannot hold a connection.
	BodyReadTimeout time.Duration `env:"CURATE_BODY_READ_TIMEOUT" envDefault:"30s"`
	BodyMinRate     int64         `env:"CURATE_BODY_MIN_RATE" envDefault:"16384"` // 16 KiB/s
	APIRate         float64       `env:"CURATE_API_RATE" envDefault:"200"`        // requests per second per API key
	APIBurst        int           `env:"CURATE_API_BURST" envDefault:"400"`
	FeedbackPerUser int           `env:"CURATE_FEEDBACK_PER_USER" envDefault:"10"` // feedback per minute per end user (user_id)
	// TrustedProxies are the addresses (IPs or CIDRs, comma-separated) of
	// the proxies whose X-Forwarded-For and X-Real-IP are believed; unset:
	// the socket's address is the client, whatever the headers say.
	TrustedProxies string `env:"CURATE_TRUSTED_PROXIES"`
	// MetricsAddr is where /metrics is served, apart from the public
	// address so that only the operator's network can read it; "off"
	// serves no metrics.
	MetricsAddr string `env:"CURATE_METRICS_ADDR" envDefault:"127.0.0.1:9090"`
	// OutboundAllow lists the hosts, addresses and CIDRs on loopback,
	// private or other special-purpose networks that calls to user-named
	// servers (Langfuse, alert webhooks, judge and chat endpoints, serving
	// targets) may reach (see internal/outbound).
	OutboundAllow string `env:"CURATE_OUTBOUND_ALLOW"`

	// Evaluation: the judge's monthly budget per organisation until an
	// admin sets one.
	JudgeBudgetUSD float64 `env:"CURATE_JUDGE_BUDGET_USD" envDefault:"20"`

	// Loops: how often every active loop's trigger is looked at, and how
	// often a run's step looks at what it waits for (a training job, a
	// deployment, an evaluation, a rollout).
	LoopCheckEvery time.Duration `env:"CURATE_LOOP_CHECK_EVERY" envDefault:"1m"`
	LoopPoll       time.Duration `env:"CURATE_LOOP_POLL" envDefault:"15s"`

	// Serving: how often every vLLM target is asked what it serves; an
	// alias resolves only to a model listed at a check no older than this.
	ServingPoll time.Duration `env:"CURATE_SERVING_POLL" envDefault:"30s"`

	// Fine-tuning. Credentials come from the environment only and are
	// never logged, rendered or stored in rows.
	FineTuneBudgetUSD float64       `env:"CURATE_FINETUNE_BUDGET_USD" envDefault:"100"` // an organisation's monthly budget until an admin sets one
	FineTunePoll      time.Duration `env:"CURATE_FINETUNE_POLL" envDefault:"30s"`       // how often a running job is looked at
	OpenAIAPIKey      string        `env:"OPENAI_API_KEY"`                              // secret
	OpenAIBaseURL     string        `env:"OPENAI_BASE_URL"`                             // unset: OpenAI's
	BedrockBucket     string        `env:"CURATE_BEDROCK_BUCKET"`                       // S3 bucket for training files
	BedrockPrefix     string        `env:"CURATE_BEDROCK_PREFIX" envDefault:"curate/fine-tuning"`
	BedrockRoleARN    string        `env:"CURATE_BEDROCK_ROLE_ARN"` // the role Bedrock assumes to read the bucket
	BedrockRegion     string        `env:"CURATE_BEDROCK_REGION"`   // unset: AWS_REGION; credentials from the AWS chain
	BedrockEndpoint   string        `env:"CURATE_BEDROCK_ENDPOINT"` // unset: AWS's
	S3Endpoint        string        `env:"CURATE_S3_ENDPOINT"`      // unset: AWS's (set: path-style addressing)

	// Local training (runs in <DataDir>/runs).
	TrainerPython  string `env:"CURATE_TRAINER_PYTHON"`                   // unset: the trainer's environment when installed (scripts/trainer-env.sh), else python3
	TrainerDir     string `env:"CURATE_TRAINER_DIR"`                      // unset: ./trainer made absolute when it exists, else unset (the installed package)
	TrainerCommand string `env:"CURATE_TRAINER_COMMAND"`                  // unset: the bundled trainer; split at spaces, the config path is appended
	GPUSlots       int    `env:"CURATE_GPU_SLOTS" envDefault:"1"`         // local trainers at once (and workers of the "gpu" queue)
	TrainerDevice  string `env:"CURATE_TRAINER_DEVICE" envDefault:"auto"` // "auto", "cuda" or "cpu"
	// ModelsDir holds the models local jobs may train, each named by its
	// path inside it; unset: <DataDir>/models.
	ModelsDir string `env:"CURATE_MODELS_DIR"`
	// TrainerAPIURL is where a local trainer reaches Curate's API (an RLAIF
	// run's reward); unset: http://127.0.0.1 at CURATE_ADDR's port.
	TrainerAPIURL string `env:"CURATE_TRAINER_API_URL"`
}

// TrainerAPI is the address at which local trainers reach Curate's API:
// TrainerAPIURL, or this machine's loopback at Addr's port.
func (c Config) TrainerAPI() string {
	if c.TrainerAPIURL != "" {
		return c.TrainerAPIURL
	}
	i := strings.LastIndexByte(c.Addr, ':')
	if i < 0 || i == len(c.Addr)-1 {
		return ""
	}
	return "http://127.0.0.1" + c.Addr[i:]
}

// FromEnv reads the environment, applying defaults, and validates the
// result.
func FromEnv() (Config, error) {
	c, err := load(env.Options{})
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Defaults is the configuration of an empty environment: what serve runs
// with when nothing is set. Tests start from it and change only what they
// need, so they cannot drift from serve's defaults.
func Defaults() Config {
	c, err := load(env.Options{Environment: map[string]string{}})
	if err != nil {
		panic("config: a default does not parse: " + err.Error())
	}
	return c
}

// load parses the environment that opts give (the process's when
// opts.Environment is nil) and fills the defaults that depend on where the
// process runs.
func load(opts env.Options) (Config, error) {
	var c Config
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return c, named(err)
	}
	if c.TrainerDir == "" {
		c.TrainerDir = defaultTrainerDir()
	}
	if c.TrainerPython == "" {
		c.TrainerPython = defaultTrainerPython(lookup(opts, "CURATE_TOOLS"))
	}
	return c, nil
}

// lookup reads one variable from the environment that opts give (the
// process's when opts.Environment is nil).
func lookup(opts env.Options, name string) string {
	if opts.Environment != nil {
		return opts.Environment[name]
	}
	return os.Getenv(name)
}

// named rewrites the parser's errors, which name Go fields, to name the
// environment variable the operator set, one error per bad variable.
func named(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	out := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			out = append(out, e)
			continue
		}
		f, _ := reflect.TypeFor[Config]().FieldByName(pe.Name)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		out = append(out, fmt.Errorf("%s: %w", name, pe.Err))
	}
	return errors.Join(out...)
}

// Proxies parses CURATE_TRUSTED_PROXIES: addresses and CIDRs.
func (c Config) Proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(c.TrustedProxies, func(r rune) bool { return r == ',' || r == ' ' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		} else {
			return nil, fmt.Errorf("CURATE_TRUSTED_PROXIES: %q is not an IP address or CIDR", f)
		}
	}
	return out, nil
}

// Metrics is the address to serve /metrics on, and false when metrics
// are off (CURATE_METRICS_ADDR "off", or empty in a Config built in code).
func (c Config) Metrics() (addr string, on bool) {
	if c.MetricsAddr == "" || strings.EqualFold(c.MetricsAddr, "off") {
		return "", false
	}
	return c.MetricsAddr, true
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
	if !(c.FineTuneBudgetUSD >= 0) || math.IsInf(c.FineTuneBudgetUSD, 1) { // NaN fails >= 0
		return fmt.Errorf("CURATE_FINETUNE_BUDGET_USD must be a number of dollars, at least 0")
	}
	if !(c.JudgeBudgetUSD >= 0) || math.IsInf(c.JudgeBudgetUSD, 1) {
		return fmt.Errorf("CURATE_JUDGE_BUDGET_USD must be a number of dollars, at least 0")
	}
	if _, err := c.Proxies(); err != nil {
		return err
	}
	if addr, on := c.Metrics(); on {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("CURATE_METRICS_ADDR must be host:port (such as 127.0.0.1:9090) or off, not %q", addr)
		}
	}
	if _, err := outbound.ParsePolicy(c.OutboundAllow); err != nil {
		return err
	}
	if c.BodyLimit < 1024 {
		return fmt.Errorf("CURATE_BODY_LIMIT must be at least 1024 bytes")
	}
	if c.ServingPoll != 0 && (c.ServingPoll < 2*time.Second || c.ServingPoll > time.Hour) {
		return fmt.Errorf("CURATE_SERVING_POLL must be 2s to 1h, not %s", c.ServingPoll)
	}
	if c.BodyReadTimeout < time.Second {
		return fmt.Errorf("CURATE_BODY_READ_TIMEOUT must be at least 1s, not %v", c.BodyReadTimeout)
	}
	if c.BodyMinRate < 1 {
		return fmt.Errorf("CURATE_BODY_MIN_RATE must be at least 1 byte per second, not %d", c.BodyMinRate)
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

// DefaultTrainerPython is the local trainer's Python when nothing else is
// installed.
const DefaultTrainerPython = "python3"

// defaultTrainerPython is the Python of the trainer's pinned environment,
// which scripts/trainer-env.sh (make trainer-env) installs and starts
// through the executable trainer-python in tools (default ~/.cache/curate),
// when that file is there; else python3 from PATH.
func defaultTrainerPython(tools string) string {
	if tools == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return DefaultTrainerPython
		}
		tools = filepath.Join(cache, "curate")
	}
	link := filepath.Join(tools, "trainer-python")
	if info, err := os.Stat(link); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return DefaultTrainerPython
	}
	return link
}

// Dev reports whether dev mode (demo data, printed credentials) is on.
func (c Config) Dev() bool { return c.Env == "dev" }
