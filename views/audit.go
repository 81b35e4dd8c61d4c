package views

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// AuditField is one readable detail of an audit entry ("Base model: gpt-4o-mini").
type AuditField struct {
	Label string
	Value string
}

// targetPages are the pages an audit target of each type opens; a user's
// page is the users list, the others are addressed by the target's id.
var targetPages = map[string]string{
	"feedback":        "/feedback/",
	"preference_pair": "/pairs/",
	"dataset":         "/datasets/",
	"fine_tuning_job": "/fine-tuning/jobs/",
}

// listPages are the pages of targets that have no page of their own: the
// list or settings page they are shown on.
var listPages = map[string]string{
	"user":                "/admin/users",
	"api_key":             "/admin/api-keys",
	"alert":               "/alerts",
	"alert_settings":      "/alerts/settings",
	"import_run":          "/imports",
	"langfuse_connection": "/imports/langfuse",
	"price_table":         "/fine-tuning/settings",
}

// AuditTarget is what an audit entry acted on, in words, and the page it
// links to where one exists (empty otherwise).
func AuditTarget(targetType, targetID string) (text, href string) {
	text = Label(targetType)
	if targetID != "" {
		text += " " + targetID
	}
	if p, ok := listPages[targetType]; ok {
		return text, p
	}
	if p, ok := targetPages[targetType]; ok && targetID != "" {
		return text, p + targetID
	}
	return text, ""
}

// AuditDetails turns an entry's JSON details into labelled fields, sorted by
// key so entries of one action read alike. Details that are not a JSON
// object are shown as one field rather than dropped.
func AuditDetails(raw []byte) []AuditField {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		if s := strings.TrimSpace(string(raw)); s != "" && s != "null" {
			return []AuditField{{Label: "Details", Value: s}}
		}
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]AuditField, 0, len(keys))
	for _, k := range keys {
		out = append(out, AuditField{Label: Label(k), Value: detailValue(m[k])})
	}
	return out
}

// detailValue is one detail's value in words: enum spellings labelled,
// lists joined, nested objects as "Key: value" pairs.
func detailValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "—"
	case string:
		if isEnum(v) {
			return Label(v)
		}
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case float64:
		return fmt.Sprint(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = detailValue(e)
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		fields := make([]string, 0, len(v))
		for _, f := range AuditDetails(mustJSON(v)) {
			fields = append(fields, f.Label+": "+f.Value)
		}
		return strings.Join(fields, "; ")
	}
	return fmt.Sprint(v)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // a value just decoded from JSON encodes again
	return b
}

// isEnum reports whether s is spelt like an enum value or code
// ("needs_correction", "dataset.export_finished") rather than free text.
func isEnum(s string) bool {
	if !strings.ContainsAny(s, "_") {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

// ActionLabel is how an audit action reads: "dataset.export_finished" is
// "Dataset export finished".
func ActionLabel(action string) string {
	if l, ok := actionLabels[action]; ok {
		return l
	}
	return Label(strings.ReplaceAll(action, ".", " "))
}

// actionLabels are the actions whose spelt-out words read wrong.
var actionLabels = map[string]string{
	"api_key.create":             "API key created",
	"api_key.revoke":             "API key revoked",
	"auth.login":                 "Signed in",
	"auth.login_failed":          "Sign-in failed",
	"auth.login_locked":          "Sign-in locked",
	"auth.logout":                "Signed out",
	"auth.logout_everywhere":     "Signed out everywhere",
	"alert.dismiss":              "Alert dismissed",
	"alerts.settings":            "Alert settings changed",
	"alerts.webhook_secret":      "Alert webhook secret changed",
	"dataset.create":             "Dataset created",
	"dataset.export":             "Dataset export started",
	"dataset.export_finished":    "Dataset export finished",
	"dataset.export_local":       "Dataset exported locally",
	"dataset.export_unmasked":    "Dataset exported unmasked",
	"dataset.freeze":             "Dataset version frozen",
	"dataset.status":             "Dataset status changed",
	"dataset.update":             "Dataset changed",
	"feedback.bulk":              "Feedback bulk review",
	"feedback.retention_removed": "Feedback removed by retention",
	"exposure.retention_removed": "Experiment exposures removed by retention",
	"org.retention_set":          "Feedback retention changed",
	"finetune.budget":            "Fine-tuning budget changed",
	"finetune.cancel":            "Fine-tuning job cancelled",
	"finetune.launch":            "Fine-tuning job launched",
	"finetune.prices":            "Fine-tuning prices changed",
	"import.start":               "Import started",
	"langfuse.connection_save":   "Langfuse connection saved",
	"langfuse.sync_requested":    "Langfuse sync requested",
	"pair.create":                "Pair created",
	"pair.delete":                "Pair deleted",
	"pair.generate":              "Pairs generated",
	"pair.rank":                  "Pair ranked",
	"pair.update":                "Pair changed",
	"user.create":                "User created",
	"user.password_change":       "Password changed",
	"user.role_change":           "Role changed",
}
