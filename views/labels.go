package views

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// labels are the words for enum values whose plain spelling reads wrong.
var labels = map[string]string{
	"thumbs_up":          "Thumbs up",
	"serving_missing":    "Version not served",
	"thumbs_down":        "Thumbs down",
	"needs_correction":   "Needs correction",
	"instruction_tuning": "Instruction tuning",
	"near_duplicate":     "Near duplicate",
	"openai_chat":        "OpenAI chat",
	"fine_tuning_job":    "Fine-tuning job",
	"preference_pair":    "Preference pair",
	"api_key":            "API key",
	"openai":             "OpenAI",
	"openai_preference":  "OpenAI preference",
	"trl_preference":     "TRL preference",
	"dpo":                "DPO",
	"sft":                "SFT",
	"pii":                "PII",
	"bedrock_chat":       "Bedrock chat",
	"langfuse":           "Langfuse",
	"hh_rlhf":            "HH-RLHF",
	"api":                "API",
	"n_epochs":           "Epochs",
	"url":                "URL",
	"id":                 "ID",
	"ids":                "IDs",
	"warn":               "Warning",
	"bad":                "Critical",
	"evaluation_quality": "Evaluation",
	"deploy_treatment":   "Deploy the treatment",
	"keep_control":       "Keep the control",
	"stop":               "Stop now",
	"keep_running":       "Keep running",
	"thumbs_up_rate":     "Thumbs-up rate",
	"avg_rating":         "Average rating",
	"correction_rate":    "Share of corrections",
	"avg_accuracy":       "Average accuracy",
	"avg_helpfulness":    "Average helpfulness",
	"avg_clarity":        "Average clarity",
	"avg_safety":         "Average safety",
	"evaluation_leak":    "Leak check",
	"judge_right":        "The judge is right",
	"human_right":        "The person is right",
	"both_wrong":         "Both are wrong",
	"thumbs_":            "Middling",
	"grpo":               "GRPO",
	"irs":                "IRS",
	"ppo":                "PPO",
	"ui":                 "UI",
	"sharegpt":           "ShareGPT",
	"vllm_pooling":       "vLLM pooling runner",

	// Experiments' analysis and the production monitors.
	"avg_judge_score":        "Average judge score",
	"bh":                     "Benjamini–Hochberg",
	"holm":                   "Holm",
	"monitor_latency":        "Latency p95",
	"monitor_feedback_rate":  "Feedback rate",
	"monitor_error_rate":     "Error rate",
	"monitor_score_shift":    "Score shift",
	"monitor_reward_latency": "Reward model latency p95",
	"monitor_reward_drift":   "Reward model score drift",
	"ks":                     "Kolmogorov–Smirnov test",
	"psi":                    "Population stability index",

	// Loops, hygiene and routing.
	"waiting_approval":    "Waiting for approval",
	"rate_outlier":        "Rate outlier",
	"duplicate_spam":      "Duplicate spam",
	"near_duplicate_spam": "Near-duplicate spam",
	"bot_session":         "Bot-like session",
	"round_robin":         "In turn",
	"by_tag":              "By tag",
	"before_deploy":       "Before the new version is deployed",
	"before_rollout":      "Before the new version reaches production",
}

// Label is how an enum value, a check or a setting's key reads on screen:
// its word from labels, or else its words with the underscores gone and the
// first one capitalised ("learning_rate_multiplier": "Learning rate
// multiplier", "rating": "Rating").
func Label(s string) string {
	if l, ok := labels[s]; ok {
		return l
	}
	s = strings.ReplaceAll(s, "_", " ")
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// Count is n with its noun in the right number: Count(1, "pair", "pairs")
// is "1 pair", Count(3, ...) is "3 pairs", Count(0, ...) is "0 pairs".
func Count[N ~int | ~int32 | ~int64](n N, one, many string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Plural(n, one, many)
}

// Plural is the noun for n things, for a page that sets the number apart
// (a large figure above its words): one for 1, many otherwise.
func Plural[N ~int | ~int32 | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// MethodLabel is a training method as the forms offer it: its name and
// what it trains on.
func MethodLabel(method string) string {
	switch method {
	case "supervised":
		return "Supervised (example answers)"
	case "dpo":
		return "DPO (preference pairs)"
	case "reward":
		return "Reward model (preference pairs)"
	case "irs":
		return "IRS (iterative rejection sampling)"
	case "grpo":
		return "GRPO (policy optimisation against a reward)"
	case "ppo":
		return "PPO (policy optimisation with a value head)"
	}
	return Label(method)
}
