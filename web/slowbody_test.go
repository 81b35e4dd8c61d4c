package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/web/webtest"
)

// slowPost sends a request over a real connection to s, its headers at
// once and its body in chunks of chunk bytes every gap, and returns the
// answer's status (0 when the server closed the connection without one)
// and how long the connection stayed open. It gives up after limit.
func slowPost(t *testing.T, s *webtest.Server, path string, header http.Header, body []byte, chunk int, gap, limit time.Duration) (int, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, strings.TrimPrefix(s.URL, "http://"), len(body))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	start := time.Now()
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < len(body); i += chunk {
			time.Sleep(gap)
			if _, err := conn.Write(body[i:min(i+chunk, len(body))]); err != nil {
				return // the server closed the connection
			}
		}
	}()
	_ = conn.SetReadDeadline(start.Add(limit))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("POST %s at %d bytes per %v: still open after %v", path, chunk, gap, limit)
		}
		return 0, time.Since(start)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	t.Logf("POST %s answered %d after %v: %.200s", path, res.StatusCode, time.Since(start).Round(time.Millisecond), b)
	return res.StatusCode, time.Since(start)
}

// An unauthenticated POST /login sent a byte at a time is cut off once its
// body falls behind the minimum rate past the read timeout: it cannot hold
// a connection open for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *config.Config) { c.BodyReadTimeout = 2 * time.Second }})
	form := []byte("email=ada%40acme.test&password=" + strings.Repeat("x", 300))
	status, open := slowPost(t, s, "/login", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		form, 1, 100*time.Millisecond, 30*time.Second)
	// The timeout is 2 s; the rest is room for a loaded machine.
	if open > 10*time.Second {
		t.Errorf("a body at 10 bytes/s held the connection %v (answer %d); want it cut off about 2 s in", open, status)
	}
	if status != http.StatusRequestTimeout && status != 0 {
		t.Errorf("the cut-off request answered %d; want 408 or the connection closed", status)
	}
}

// A bulk upload slower than the read timeout but above the minimum rate
// goes through: the timeout grows with the bytes received.
func TestSlowBulkUploadAboveTheMinimumRate(t *testing.T) {
	t.Parallel()
	s := webtest.New(t, webtest.Options{Configure: func(c *config.Config) {
		c.BodyReadTimeout, c.BodyMinRate = 1*time.Second, 2000
	}})
	key := s.APIKey(s.Org("acme"), "assistant", "curator")
	items := make([]map[string]any, 120)
	for i := range items {
		items[i] = map[string]any{"external_id": fmt.Sprintf("slow-%d", i), "query": fmt.Sprintf("question %d, asked slowly", i),
			"response": "an answer of some length", "feedback_type": "thumbs_up"}
	}
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	// About 4,000 bytes/s, twice the minimum, for about 3 s: three times
	// the read timeout.
	status, open := slowPost(t, s, "/api/feedback/batch", http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
		body, 400, 100*time.Millisecond, time.Minute)
	if status != http.StatusOK {
		t.Fatalf("a %d-byte batch at 4,000 bytes/s: answer %d after %v; want 200", len(body), status, open)
	}
	if open < time.Second {
		t.Errorf("the upload took %v; the test needs it slower than the 1 s timeout", open)
	}
	if n := feedbackCount(t, s); n != len(items) {
		t.Errorf("%d rows stored; want %d", n, len(items))
	}
}
