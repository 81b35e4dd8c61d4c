package bedrocktest_test

import (
	"net/http"
	"testing"

	"github.com/curate/curate/internal/provider/bedrocktest"
)

func TestRefusesUnsignedRequests(t *testing.T) {
	srv := bedrocktest.New(t)
	for _, tt := range []struct {
		url, errorType string
	}{
		{srv.BedrockURL() + "/model-customization-jobs", "UnrecognizedClientException"},
		{srv.S3URL() + "/" + bedrocktest.Bucket + "?list-type=2", ""},
	} {
		resp, err := http.Get(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-ErrorType") != tt.errorType {
			t.Fatalf("%s unsigned: %d %q", tt.url, resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
		}
	}
}

func TestMetricsCSV(t *testing.T) {
	got := string(bedrocktest.MetricsCSV("validation_loss", bedrocktest.DefaultScript().ValidationMetrics))
	want := "step_number,epoch_number,validation_loss,perplexity\n1,1,2,7.5\n3,2,1.5,4.5\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
