package db

import (
	"strings"
	"testing"
)

// The streaming methods read their queries from db/queries: both are found
// there whole (up to the next query's name), and every query of the files
// is found under its own name.
func TestStreamedQueries(t *testing.T) {
	for name, want := range map[string][]string{
		"DatasetVersionItemListSplit": {"FROM dataset_version_items", "@version_id AND split = @split", "ORDER BY content_sha, source_id"},
		"DatasetVersionItemListFacts": {"LEFT JOIN item_facts", "@after_source::uuid", "LIMIT @row_limit"},
	} {
		sql := querySQL(name)
		for _, w := range want {
			if !strings.Contains(sql, w) {
				t.Errorf("%s: %q lacks %q", name, sql, w)
			}
		}
		if strings.Contains(sql, "-- name:") {
			t.Errorf("%s runs into the next query: %q", name, sql)
		}
	}
	// Every query of the files is read, under its name, and not empty.
	files, err := queryFiles.ReadDir("queries")
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, f := range files {
		b, _ := queryFiles.ReadFile("queries/" + f.Name())
		for _, m := range queryDecl.FindAllStringSubmatch(string(b), -1) {
			declared++
			if strings.TrimSpace(queries()[m[1]]) == "" {
				t.Errorf("%s: query %s read empty", f.Name(), m[1])
			}
		}
	}
	if declared < 100 || len(queries()) != declared {
		t.Errorf("read %d queries of %d declared", len(queries()), declared)
	}
}
