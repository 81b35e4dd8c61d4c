package codebook

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// Export writes the newest published version in the playbook text format
// (ACE: "## SECTION" headers and "[id] helpful=X harmful=Y :: content"
// lines), whole.
func (s *Service) Export(ctx context.Context, orgID uuid.UUID, name string) (Published, error) {
	return s.Current(ctx, orgID, name, 0)
}

var ruleLine = regexp.MustCompile(`^\[([0-9a-fA-F-]{36})\] helpful=(\d+) harmful=(\d+) :: (.+)$`)

// ParsePlaybook reads the playbook text format. Every line is a "## "
// section header, a rule line, or blank; anything else refuses the whole
// file with its line number.
func ParsePlaybook(text string) ([]VersionRule, error) {
	var out []VersionRule
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "## "):
			section = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(l, "## ")))
		default:
			m := ruleLine.FindStringSubmatch(l)
			if m == nil {
				return nil, errs.InvalidField("file", "line %d is neither a \"## SECTION\" header nor a \"[id] helpful=X harmful=Y :: content\" rule", line)
			}
			if section == "" {
				return nil, errs.InvalidField("file", "line %d: a rule before any \"## SECTION\" header", line)
			}
			id, err := uuid.Parse(m[1])
			if err != nil {
				return nil, errs.InvalidField("file", "line %d: %q is not an id", line, m[1])
			}
			var helpful, harmful int
			fmt.Sscan(m[2], &helpful)
			fmt.Sscan(m[3], &harmful)
			out = append(out, VersionRule{ID: id, Section: section, Content: strings.TrimSpace(m[4]), Helpful: helpful, Harmful: harmful})
		}
		if len(out) > MaxImport {
			return nil, errs.InvalidField("file", "more than %d rules", MaxImport)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, errs.InvalidField("file", "line %d is too long", line+1)
	}
	if len(out) == 0 {
		return nil, errs.InvalidField("file", "holds no rule")
	}
	return out, nil
}

// Import adds rules (from a playbook or JSON) to a codebook as active
// rules with new ids, keeping their counters, and publishes the result:
// into an empty codebook, the same hash as the export's. The whole file is
// refused on any bad rule.
func (s *Service) Import(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, rules []VersionRule) (Published, error) {
	if err := CheckName(name); err != nil {
		return Published{}, err
	}
	v := &errs.Invalid{}
	for i := range rules {
		n := NewRule{Section: rules[i].Section, Content: rules[i].Content, Status: "active"}
		n.check(v, fmt.Sprintf("rules[%d].", i))
		rules[i].Section, rules[i].Content = n.Section, n.Content
	}
	if err := v.Err(); err != nil {
		return Published{}, err
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		b, err := q.CodebookInsertOrGet(ctx, db.CodebookInsertOrGetParams{OrgID: orgID, Name: name})
		if err != nil {
			return err
		}
		for _, r := range rules {
			if err := q.CodebookRuleInsertImported(ctx, db.CodebookRuleInsertImportedParams{OrgID: orgID, CodebookID: b.ID, Section: r.Section,
				Content: r.Content, Helpful: int32(r.Helpful), Harmful: int32(r.Harmful), CreatedByLabel: actor.Label}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.import", TargetType: "codebook",
			TargetID: b.ID.String(), Details: map[string]any{"name": name, "rules": len(rules)}})
	})
	if err != nil {
		return Published{}, err
	}
	p, _, err := s.Publish(ctx, actor, orgID, name)
	return p, err
}
