package publicdata

import (
	"path/filepath"
	"testing"
)

// go test runs in the package's folder, so ../../../shared/data is the
// folder beside the checkout.
func TestDirIsBesideTheCheckout(t *testing.T) {
	want, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Dir(); got != want {
		t.Fatalf("Dir() = %s, want %s", got, want)
	}
}
