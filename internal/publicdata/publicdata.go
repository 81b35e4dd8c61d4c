// Package publicdata finds the real public data sets that tests use as
// acceptance data. They live in ../shared/data beside the checkout (CI keeps
// them there); a clone on its own has no such folder, so a test that needs
// them skips with one line naming the folder, unless CI=true, where a
// missing folder is a failure.
package publicdata

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is the folder of public data, whether or not it exists: shared/data
// beside the module's root.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	// file is <root>/internal/publicdata/publicdata.go
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	return filepath.Join(filepath.Dir(root), "shared", "data")
}

// Path returns the path of a file inside the public data folder. When the
// folder is missing the test skips (CI unset) or fails (CI=true).
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	dir := Dir()
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("public test data missing: %s (CI keeps shared/ beside the checkout)", dir)
		}
		tb.Skipf("public test data not found at %s (it sits beside the checkout in CI)", dir)
	}
	p := filepath.Join(append([]string{dir}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("public test data: %v", err)
	}
	return p
}
