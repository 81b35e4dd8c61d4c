package db_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Query names read noun first, then one verb of a fixed set, then any
// qualifier: FeedbackGetByExternalID, DatasetGetForUpdate, PairInsertMany,
// AlertSettingsInsertOrUpdate. Completion lists then group a noun's queries
// together, and the verb says what the query does.
var queryName = regexp.MustCompile(`^([A-Z][a-z]+|API)+?(Get|List|Count|Insert|Update|Delete)([A-Z][A-Za-z]*)?$`)

func TestQueryNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no query files: %v", err)
	}
	decl := regexp.MustCompile(`(?m)^-- name: (\w+) :`)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			n++
			if name := string(m[1]); !queryName.MatchString(name) {
				t.Errorf("%s: query %s is not noun, verb (Get, List, Count, Insert, Update, Delete), qualifier", f, name)
			}
		}
	}
	if n < 100 {
		t.Fatalf("found only %d queries", n)
	}
	for _, bad := range []string{"GetFeedback", "FeedbackLock", "APIKeyTouch", "AlertSettingsUpsert"} {
		if queryName.MatchString(bad) {
			t.Errorf("%s passes the naming rule", bad)
		}
	}
}
