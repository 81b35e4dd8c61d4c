package accounts_test

import (
	"testing"

	"github.com/curate/curate/db/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
