// Package codebook keeps the organisation's codebooks: rules distilled
// from expert corrections that an assistant retrieves and puts in its
// prompt, so a fix applies the same day with no training. Rules have a
// section, a status (draft, active, retired) and helpful/harmful/neutral
// counters from feedback that reports using them; a published version is
// an immutable, hashed snapshot of the active rules, which the assistant is
// served and retrieves from.
package codebook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/judge"
	"github.com/curate/curate/internal/tokens"
)

// Limits on input.
const (
	MaxContent = 2000
	MaxSection = 100
	MaxQuery   = 2000
	MaxK       = 50
	MaxSources = 100
	MaxImport  = 5000 // rules in one import
)

// Statuses of a rule.
var Statuses = []string{"draft", "active", "retired"}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Service does the work.
type Service struct {
	Pool *pgxpool.Pool
	// Judge asks the reflector for suggested rules; nil leaves
	// suggestions off.
	Judge *judge.Service
	// Jobs inserts suggestion jobs in the transaction that records them.
	Jobs jobq.Inserter
}

// New builds the codebooks' service: judge asks the reflector for
// suggested rules (nil leaves suggestions off) and jobs starts them.
func New(pool *pgxpool.Pool, judge *judge.Service, jobs jobq.Inserter) *Service {
	return &Service{Pool: pool, Judge: judge, Jobs: jobs}
}

// Rule is a rule as the API shows it.
type Rule struct {
	ID                uuid.UUID   `json:"id"`
	Section           string      `json:"section"`
	Content           string      `json:"content"`
	Status            string      `json:"status"`
	Helpful           int         `json:"helpful"`
	Harmful           int         `json:"harmful"`
	Neutral           int         `json:"neutral"`
	SourceFeedbackIDs []uuid.UUID `json:"source_feedback_ids"`
	Version           int         `json:"version"`
	CreatedBy         string      `json:"created_by"`
	CreatedAt         time.Time   `json:"created_at"`
	// Flagged: as often harmful as helpful, to be reviewed.
	Flagged bool `json:"flagged"`
}

func ruleOf(r db.CodebookRule) Rule {
	return Rule{ID: r.ID, Section: r.Section, Content: r.Content, Status: string(r.Status), Helpful: int(r.Helpful), Harmful: int(r.Harmful),
		Neutral: int(r.Neutral), SourceFeedbackIDs: r.SourceFeedbackIds, Version: int(r.Version), CreatedBy: r.CreatedByLabel,
		CreatedAt: r.CreatedAt, Flagged: r.Harmful > 0 && r.Harmful >= r.Helpful}
}

// NewRule is what POST /api/codebooks/:name/rules takes.
type NewRule struct {
	Section           string      `json:"section"`
	Content           string      `json:"content"`
	Status            string      `json:"status"`
	SourceFeedbackIDs []uuid.UUID `json:"source_feedback_ids"`
	// SuggestionID, when the rule is a reviewed suggestion, marks it
	// accepted as this rule.
	SuggestionID *uuid.UUID `json:"suggestion_id,omitempty"`
}

// Added is a new rule, and the rules it may duplicate.
type Added struct {
	Rule
	NearDuplicates []Similar `json:"near_duplicates"`
}

// CheckName refuses a name a codebook cannot have.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return errs.InvalidField("name", "a codebook's name is lower-case letters, digits, '.', '_' or '-', at most 64")
	}
	return nil
}

func (n *NewRule) check(v *errs.Invalid, prefix string) {
	// A rule is one line, its section lower-case: the playbook format
	// writes both back as they are.
	n.Section = strings.ToLower(strings.Join(strings.Fields(n.Section), " "))
	n.Content = strings.Join(strings.Fields(n.Content), " ")
	if n.Section == "" {
		n.Section = "general"
	}
	v.Text(prefix+"section", n.Section, MaxSection, true)
	if strings.ContainsAny(n.Section, "\n#") {
		v.Add(prefix+"section", "is one line without '#'")
	}
	v.Text(prefix+"content", n.Content, MaxContent, true)
	if n.Status == "" {
		n.Status = "draft"
	}
	if !slices.Contains(Statuses, n.Status) {
		v.Add(prefix+"status", "must be draft, active or retired")
	}
	if len(n.SourceFeedbackIDs) > MaxSources {
		v.Add(prefix+"source_feedback_ids", "at most %d", MaxSources)
	}
}

// AddRule adds a rule to a codebook, creating the codebook on first use,
// and answers it with the codebook's rules that look like it.
func (s *Service) AddRule(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, in NewRule) (Added, error) {
	if err := CheckName(name); err != nil {
		return Added{}, err
	}
	v := &errs.Invalid{}
	in.check(v, "")
	if err := v.Err(); err != nil {
		return Added{}, err
	}
	var out Added
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		book, err := q.CodebookInsertOrGet(ctx, db.CodebookInsertOrGetParams{OrgID: orgID, Name: name})
		if err != nil {
			return err
		}
		if err := checkSources(ctx, q, orgID, in.SourceFeedbackIDs); err != nil {
			return err
		}
		r, err := q.CodebookRuleInsert(ctx, db.CodebookRuleInsertParams{OrgID: orgID, CodebookID: book.ID, Section: in.Section,
			Content: in.Content, Status: db.RuleStatus(in.Status), SourceFeedbackIds: nonNil(in.SourceFeedbackIDs), CreatedByLabel: actor.Label})
		if err != nil {
			return err
		}
		out.Rule = ruleOf(r)
		if in.SuggestionID != nil {
			if err := markAccepted(ctx, q, orgID, book.ID, *in.SuggestionID, r.ID); err != nil {
				return err
			}
		}
		if out.NearDuplicates, err = similar(ctx, q, book.ID, in.Content, r.ID); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.rule_add", TargetType: "codebook_rule",
			TargetID: r.ID.String(), Details: map[string]any{"codebook": name, "section": in.Section}})
	})
	if out.NearDuplicates == nil {
		out.NearDuplicates = []Similar{}
	}
	return out, err
}

// checkSources refuses source ids that are not feedback items of the
// organisation.
func checkSources(ctx context.Context, q *db.Queries, orgID uuid.UUID, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	found, err := q.FeedbackListByIDs(ctx, db.FeedbackListByIDsParams{OrgID: orgID, Ids: ids})
	if err != nil {
		return err
	}
	if len(found) != len(ids) {
		return errs.InvalidField("source_feedback_ids", "name feedback items of this organisation")
	}
	return nil
}

func nonNil(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

// book reads a codebook by name.
func book(ctx context.Context, q *db.Queries, orgID uuid.UUID, name string) (db.Codebook, error) {
	b, err := q.CodebookGetByName(ctx, db.CodebookGetByNameParams{OrgID: orgID, Name: name})
	return b, errs.NotFound(err)
}

// lockBook reads a codebook and holds it until the transaction ends.
func lockBook(ctx context.Context, q *db.Queries, orgID uuid.UUID, name string) (db.Codebook, error) {
	b, err := q.CodebookGetByNameForUpdate(ctx, db.CodebookGetByNameForUpdateParams{OrgID: orgID, Name: name})
	return b, errs.NotFound(err)
}

// Sorts are the orders Rules offers: by section (""), or the most helpful
// or the most harmful first.
var Sorts = []string{"", "helpful", "harmful"}

// Rules lists a codebook's rules, by section, the most harmful first, or
// in the order sort names.
func (s *Service) Rules(ctx context.Context, orgID uuid.UUID, name, status, q, sort string) ([]Rule, error) {
	if !slices.Contains(Sorts, sort) {
		return nil, errs.InvalidField("sort", "must be helpful or harmful")
	}
	qq := db.New(s.Pool)
	b, err := book(ctx, qq, orgID, name)
	if err != nil {
		return nil, err
	}
	rows, err := qq.CodebookRuleList(ctx, db.CodebookRuleListParams{CodebookID: b.ID, Status: status, Q: q, Sort: sort})
	if err != nil {
		return nil, err
	}
	out := make([]Rule, len(rows))
	for i, r := range rows {
		out[i] = ruleOf(r)
	}
	return out, nil
}

// UpdateRule edits a rule if it is still at version; otherwise it answers
// 409 with the rule as it is now. Version 0 edits it as it is (last write
// wins), and the audit record says so.
func (s *Service) UpdateRule(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, id uuid.UUID, version int, in NewRule) (Rule, error) {
	v := &errs.Invalid{}
	in.check(v, "")
	if err := v.Err(); err != nil {
		return Rule{}, err
	}
	var out db.CodebookRule
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		b, err := book(ctx, q, orgID, name)
		if err != nil {
			return err
		}
		cur, err := q.CodebookRuleGet(ctx, db.CodebookRuleGetParams{OrgID: orgID, CodebookID: b.ID, ID: id})
		if err != nil {
			return errs.NotFound(err)
		}
		asked := int32(version)
		if version == 0 {
			version = int(cur.Version) // no If-Match: the last write wins
		}
		out, err = q.CodebookRuleUpdate(ctx, db.CodebookRuleUpdateParams{OrgID: orgID, ID: id, Version: int32(version), Section: in.Section,
			Content: in.Content, Status: db.RuleStatus(in.Status)})
		if errors.Is(err, pgx.ErrNoRows) {
			return &errs.Conflict{Message: "Someone else changed this rule first.", Current: ruleOf(cur)}
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.rule_update", TargetType: "codebook_rule",
			TargetID: id.String(), Details: audit.Unconditional(map[string]any{"codebook": name, "status": in.Status}, asked)})
	})
	return ruleOf(out), err
}

// Published is a published version as the assistant reads it.
type Published struct {
	Version     int           `json:"version"`
	ContentHash string        `json:"content_hash"`
	Rules       []VersionRule `json:"rules"`
	Prompt      string        `json:"prompt,omitempty"`
	PublishedAt time.Time     `json:"published_at"`
}

// VersionRule is a published rule with its current counters.
type VersionRule struct {
	ID      uuid.UUID `json:"id"`
	Section string    `json:"section"`
	Content string    `json:"content"`
	Helpful int       `json:"helpful"`
	Harmful int       `json:"harmful"`
	Neutral int       `json:"neutral"`
}

// hash is the version's content hash: sha256 over the canonical JSON of
// its rules (section, content) in order. Ids are left out: rules imported
// into another codebook get new ones and publish the same hash.
func hash(rules []VersionRule) (string, error) {
	type canon struct {
		Section string `json:"section"`
		Content string `json:"content"`
	}
	c := make([]canon, len(rules))
	for i, r := range rules {
		c[i] = canon{r.Section, r.Content}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Publish snapshots the active rules as the next version (the same rules
// as the newest version publish nothing new and answer it).
func (s *Service) Publish(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string) (Published, bool, error) {
	var out Published
	created := false
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		// Publishes of one codebook take turns: the second of two at once
		// finds the first's version holding the same rules and returns it.
		b, err := lockBook(ctx, q, orgID, name)
		if err != nil {
			return err
		}
		rules, err := activeRules(ctx, q, b.ID)
		if err != nil {
			return err
		}
		if len(rules) == 0 {
			return errs.InvalidField("rules", "the codebook has no active rule to publish")
		}
		h, err := hash(rules)
		if err != nil {
			return err
		}
		if latest, err := q.CodebookVersionGetLatest(ctx, b.ID); err == nil && latest.ContentHash == h {
			out = Published{Version: int(latest.Version), ContentHash: h, Rules: rules, PublishedAt: latest.CreatedAt}
			return nil
		} else if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		v, err := q.CodebookVersionInsert(ctx, db.CodebookVersionInsertParams{OrgID: orgID, CodebookID: b.ID, ContentHash: h, PublishedByLabel: actor.Label})
		if err != nil {
			return err
		}
		params := make([]db.CodebookVersionRuleInsertManyParams, len(rules))
		for i, r := range rules {
			params[i] = db.CodebookVersionRuleInsertManyParams{VersionID: v.ID, Position: int32(i), RuleID: r.ID, Section: r.Section, Content: r.Content}
		}
		if _, err := q.CodebookVersionRuleInsertMany(ctx, params); err != nil {
			return err
		}
		created = true
		out = Published{Version: int(v.Version), ContentHash: h, Rules: rules, PublishedAt: v.CreatedAt}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.publish", TargetType: "codebook",
			TargetID: b.ID.String(), Details: map[string]any{"name": name, "version": v.Version, "content_hash": h, "rules": len(rules)}})
	})
	return out, created, err
}

// latest reads a codebook's newest published version.
func latest(ctx context.Context, q *db.Queries, orgID uuid.UUID, name string) (db.CodebookVersion, error) {
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return db.CodebookVersion{}, err
	}
	v, err := q.CodebookVersionGetLatest(ctx, b.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, &errs.Conflict{Message: "The codebook has no published version yet."}
	}
	return v, err
}

// Current reads the newest published version with its rules' counters, and
// its prompt text cut to budgetTokens (0: whole).
func (s *Service) Current(ctx context.Context, orgID uuid.UUID, name string, budgetTokens int) (Published, error) {
	q := db.New(s.Pool)
	v, err := latest(ctx, q, orgID, name)
	if err != nil {
		return Published{}, err
	}
	rows, err := q.CodebookVersionRuleList(ctx, v.ID)
	if err != nil {
		return Published{}, err
	}
	out := Published{Version: int(v.Version), ContentHash: v.ContentHash, PublishedAt: v.CreatedAt, Rules: make([]VersionRule, len(rows))}
	for i, r := range rows {
		out.Rules[i] = VersionRule{ID: r.RuleID, Section: r.Section, Content: r.Content, Helpful: int(r.Helpful), Harmful: int(r.Harmful), Neutral: int(r.Neutral)}
	}
	if out.Prompt, err = Prompt(out.Rules, budgetTokens); err != nil {
		return Published{}, err
	}
	return out, nil
}

// Prompt writes rules in the playbook text format, by section, stopping
// before the rule that would pass budgetTokens (cl100k_base; 0: no limit).
func Prompt(rules []VersionRule, budgetTokens int) (string, error) {
	w, err := writePrompt(rules, budgetTokens)
	return w.text, err
}

// written is a playbook prompt with how many rules it holds and how many
// tokens it takes.
type written struct {
	text          string
	rules, tokens int
}

// writePrompt writes the prompt for Prompt. Each rule's lines are counted
// once and the counts summed, so a long codebook is counted in one pass;
// the text is then counted whole, and in the rare case where tokens merged
// differently across a rule's edge put it over the budget, rules come off
// the end until it fits.
func writePrompt(rules []VersionRule, budgetTokens int) (written, error) {
	counter, err := tokens.New("cl100k_base")
	if err != nil {
		return written{}, err
	}
	var chunks []string
	section, sum := "", 0
	for _, r := range rules {
		var chunk strings.Builder
		if r.Section != section {
			if len(chunks) > 0 {
				chunk.WriteString("\n")
			}
			fmt.Fprintf(&chunk, "## %s\n", strings.ToUpper(r.Section))
		}
		fmt.Fprintf(&chunk, "[%s] helpful=%d harmful=%d :: %s\n", r.ID, r.Helpful, r.Harmful, r.Content)
		n := counter.Count(chunk.String())
		if budgetTokens > 0 && sum+n > budgetTokens {
			break
		}
		chunks, sum, section = append(chunks, chunk.String()), sum+n, r.Section
	}
	for {
		w := written{text: strings.Join(chunks, ""), rules: len(chunks)}
		w.tokens = counter.Count(w.text)
		if budgetTokens == 0 || w.tokens <= budgetTokens || len(chunks) == 0 {
			return w, nil
		}
		chunks = chunks[:len(chunks)-1]
	}
}

// activeRules reads the rules a published version of the codebook would
// hold, in the order it writes them, with their counters.
func activeRules(ctx context.Context, q *db.Queries, bookID uuid.UUID) ([]VersionRule, error) {
	rows, err := q.CodebookRuleListActive(ctx, bookID)
	if err != nil {
		return nil, err
	}
	rules := make([]VersionRule, len(rows))
	for i, r := range rows {
		rules[i] = VersionRule{ID: r.ID, Section: r.Section, Content: r.Content, Helpful: int(r.Helpful), Harmful: int(r.Harmful), Neutral: int(r.Neutral)}
	}
	return rules, nil
}

// Retrieved is one rule a query brought back, with its score.
type Retrieved struct {
	ID      uuid.UUID `json:"id"`
	Section string    `json:"section"`
	Content string    `json:"content"`
	Score   float64   `json:"score"`
}

// Retrieve returns the k rules of the newest published version most
// relevant to query, best first.
func (s *Service) Retrieve(ctx context.Context, orgID uuid.UUID, name, query string, k int) (int, []Retrieved, error) {
	v := &errs.Invalid{}
	v.Text("query", query, MaxQuery, true)
	if k < 1 || k > MaxK {
		v.Add("k", "must be 1 to %d", MaxK)
	}
	if err := v.Err(); err != nil {
		return 0, nil, err
	}
	q := db.New(s.Pool)
	ver, err := latest(ctx, q, orgID, name)
	if err != nil {
		return 0, nil, err
	}
	rows, err := q.CodebookVersionRuleListRelevant(ctx, db.CodebookVersionRuleListRelevantParams{VersionID: ver.ID, Query: query, K: int32(k)})
	if err != nil {
		return 0, nil, err
	}
	out := make([]Retrieved, len(rows))
	for i, r := range rows {
		out[i] = Retrieved{ID: r.RuleID, Section: r.Section, Content: r.Content, Score: r.Score}
	}
	return int(ver.Version), out, nil
}

// Versions lists a codebook's published versions, newest first.
func (s *Service) Versions(ctx context.Context, orgID uuid.UUID, name string) ([]db.CodebookVersion, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return nil, err
	}
	return q.CodebookVersionList(ctx, b.ID)
}

// List lists the organisation's codebooks.
func (s *Service) List(ctx context.Context, orgID uuid.UUID) ([]db.CodebookListRow, error) {
	return db.New(s.Pool).CodebookList(ctx, orgID)
}
