package imports_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/langfuse"
	"github.com/curate/curate/internal/langfuse/langfusetest"
	"github.com/curate/curate/internal/outbound"
)

// allow is an outbound client under the policy CURATE_OUTBOUND_ALLOW=policy.
func allow(t testing.TB, policy string) *outbound.Client {
	t.Helper()
	p, err := outbound.ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	return &outbound.Client{Policy: p}
}

var admin = audit.Actor{Kind: "system", Label: "admin@acme.test"}

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fakeLangfuse(t *testing.T) *langfusetest.Server {
	chat := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Capital of France?"}}}
	return langfusetest.NewServer(t, langfusetest.Options{
		PageSize: 2, // several pages
		Traces: []langfusetest.Trace{
			{ID: "tr-1", Input: chat, Output: "Lyon", SessionID: "sess-1", UserID: "u-1"},
			{ID: "tr-2", Input: "How are you?", Output: map[string]string{"answer": "Fine."}},
		},
		Scores: []langfusetest.Score{
			{ID: "s-bool", TraceID: "tr-1", Name: "correct", DataType: "BOOLEAN", Value: 0, Timestamp: at},
			{ID: "s-fix", TraceID: "tr-1", Name: "output", DataType: "CORRECTION", StringValue: "Paris", Timestamp: at.Add(time.Minute)},
			{ID: "s-rate", TraceID: "tr-2", Name: "quality", DataType: "NUMERIC", Value: 4, Comment: "good", Timestamp: at.Add(2 * time.Minute)},
			{ID: "s-thumb", TraceID: "tr-2", Name: "user-feedback", DataType: "NUMERIC", Value: 1, Timestamp: at.Add(3 * time.Minute)},
			{ID: "s-cat", TraceID: "tr-2", Name: "topic", DataType: "CATEGORICAL", StringValue: "smalltalk", Timestamp: at.Add(4 * time.Minute)},
			{ID: "s-gone", TraceID: "tr-missing", Name: "quality", DataType: "NUMERIC", Value: 2, Timestamp: at.Add(5 * time.Minute)},
		},
	})
}

func (f *env) connect(t *testing.T, host, secret string) {
	t.Helper()
	if _, err := f.svc.SaveConnection(f.ctx, admin, f.orgID, imports.ConnectionInput{Host: host, PublicKey: langfusetest.DefaultPublicKey, SecretKey: secret}); err != nil {
		t.Fatal(err)
	}
}

func TestLangfuseSync(t *testing.T) {
	f := newEnv(t)
	srv := fakeLangfuse(t)
	f.connect(t, srv.URL, srv.SecretKey)

	conn, err := f.svc.Connection(f.ctx, f.orgID)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(conn.SecretCiphertext, []byte(srv.SecretKey)) {
		t.Fatal("the secret key is stored in the clear")
	}

	sum, err := f.svc.Sync(f.ctx, f.orgID)
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := map[string]int{string(langfuse.SkipCategorical): 1, string(langfuse.SkipTraceNotFound): 1}
	if sum.Stored != 4 || sum.Skipped != 2 || sum.Reasons[string(langfuse.SkipCategorical)] != 1 || sum.Reasons[string(langfuse.SkipTraceNotFound)] != 1 {
		t.Fatalf("first sync: %+v, want 4 stored and skipped %v", sum, wantReasons)
	}
	type row struct {
		typ, query, response, correction, session string
		rating                                    *int16
	}
	want := map[string]row{
		"langfuse:s-bool":  {typ: "thumbs_down", query: "Capital of France?", response: "Lyon", session: "sess-1"},
		"langfuse:s-fix":   {typ: "correction", query: "Capital of France?", response: "Lyon", correction: "Paris", session: "sess-1"},
		"langfuse:s-rate":  {typ: "rating", query: "How are you?", response: "Fine.", rating: ptr(int16(4))},
		"langfuse:s-thumb": {typ: "thumbs_up", query: "How are you?", response: "Fine."},
	}
	for ext, w := range want {
		var got row
		err := f.pool.QueryRow(f.ctx, `SELECT feedback_type::text, query, response, correction, session_id, rating FROM feedback
			WHERE external_id = $1 AND source = 'langfuse'`, ext).Scan(&got.typ, &got.query, &got.response, &got.correction, &got.session, &got.rating)
		if err != nil {
			t.Fatalf("%s: %v", ext, err)
		}
		if got.typ != w.typ || got.query != w.query || got.response != w.response || got.correction != w.correction ||
			got.session != w.session || (got.rating == nil) != (w.rating == nil) || (got.rating != nil && *got.rating != *w.rating) {
			t.Errorf("%s: got %+v, want %+v", ext, got, w)
		}
	}
	conn, _ = f.svc.Connection(f.ctx, f.orgID)
	if conn.LastSyncAt == nil || conn.LastStored != 4 || conn.TotalStored != 4 || conn.SyncFrom == nil || !conn.SyncFrom.Equal(at.Add(5*time.Minute)) || conn.LastError != "" {
		t.Fatalf("connection after sync: %+v", conn)
	}

	// The second sync adds nothing. It lists scores from the newest one
	// seen on, which is only s-gone (skipped: its trace is missing), so it
	// asks for that one trace again and for no trace of a stored score.
	traces := srv.Requests(langfusetest.EndpointTrace)
	sum, err = f.svc.Sync(f.ctx, f.orgID)
	if err != nil || sum.Stored != 0 {
		t.Fatalf("second sync: %+v, %v", sum, err)
	}
	if n := f.count(t, "SELECT count(*) FROM feedback"); n != 4 {
		t.Fatalf("%d rows after the second sync, want 4", n)
	}
	if got := srv.Requests(langfusetest.EndpointTrace) - traces; got != 1 {
		t.Errorf("the second sync fetched %d traces, want 1", got)
	}

	// A score given later is picked up; the total grows.
	srv.AddScores(langfusetest.Score{ID: "s-late", TraceID: "tr-1", Name: "stars", DataType: "NUMERIC", Value: 5, Timestamp: at.Add(time.Hour)})
	if sum, err = f.svc.Sync(f.ctx, f.orgID); err != nil || sum.Stored != 1 {
		t.Fatalf("third sync: %+v, %v", sum, err)
	}
	if conn, _ = f.svc.Connection(f.ctx, f.orgID); conn.TotalStored != 5 {
		t.Fatalf("total stored %d, want 5", conn.TotalStored)
	}
}

func ptr[T any](v T) *T { return &v }

// Keys refused, an unreachable host, or a failure halfway: the error is
// recorded on the connection and nothing is stored.
func TestLangfuseSyncFailures(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(f *env, srv *langfusetest.Server)
		is      error
		mention string
	}{
		{"wrong secret", func(f *env, srv *langfusetest.Server) { f.connect(t, srv.URL, "sk-lf-wrong") },
			langfuse.ErrUnauthorized, "rejected the API keys"},
		{"unreachable", func(f *env, srv *langfusetest.Server) {
			dead := langfusetest.NewServer(t, langfusetest.Options{})
			dead.Close()
			f.connect(t, dead.URL, srv.SecretKey)
		}, langfuse.ErrUnreachable, "Reading scores failed: The server refused the connection."},
		{"trace refused halfway", func(f *env, srv *langfusetest.Server) {
			f.connect(t, srv.URL, srv.SecretKey)
			srv.FailNext(langfusetest.EndpointTrace, 403, 1)
		}, langfuse.ErrUnauthorized, "refused access"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newEnv(t)
			srv := fakeLangfuse(t)
			tc.setup(f, srv)
			_, err := f.svc.Sync(f.ctx, f.orgID)
			var se *imports.LangfuseError
			if !errors.As(err, &se) || !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want a LangfuseError matching %v", err, tc.is)
			}
			conn, _ := f.svc.Connection(f.ctx, f.orgID)
			if !strings.Contains(conn.LastError, tc.mention) || conn.LastSyncAt != nil || conn.SyncStartedAt != nil {
				t.Fatalf("connection: last error %q, last sync %v, started %v", conn.LastError, conn.LastSyncAt, conn.SyncStartedAt)
			}
			if n := f.count(t, "SELECT count(*) FROM feedback"); n != 0 {
				t.Fatalf("%d rows stored by a failed sync", n)
			}
			if err := f.svc.TestConnection(f.ctx, f.orgID); tc.name != "trace refused halfway" && !errors.Is(err, tc.is) {
				t.Errorf("TestConnection = %v, want %v", err, tc.is)
			}
		})
	}
}

func TestSaveConnection(t *testing.T) {
	f := newEnv(t)
	srv := fakeLangfuse(t)
	_, err := f.svc.SaveConnection(f.ctx, admin, f.orgID, imports.ConnectionInput{Host: "ftp://x", PublicKey: "", SecretKey: ""})
	var inv *errs.Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v, want field errors", err)
	}
	if got := strings.Join(inv.Fields(), ","); got != "host,public_key,secret_key" {
		t.Fatalf("fields %s", got)
	}

	f.connect(t, srv.URL, srv.SecretKey)
	// Saving again without a secret keeps the stored one.
	if _, err := f.svc.SaveConnection(f.ctx, admin, f.orgID, imports.ConnectionInput{Host: srv.URL + "/", PublicKey: langfusetest.DefaultPublicKey}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.TestConnection(f.ctx, f.orgID); err != nil {
		t.Fatalf("the kept secret does not work: %v", err)
	}
	if n := f.count(t, "SELECT count(*) FROM audit_log WHERE action = 'langfuse.connection_save' AND NOT details::text LIKE '%sk-lf%'"); n != 2 {
		t.Fatalf("%d audit entries without the secret, want 2", n)
	}
}

// A requested sync and the periodic one queue their job themselves, one per
// organisation while it waits; a request without a connection queues none.
func TestQueueSyncs(t *testing.T) {
	f := newEnv(t)
	if _, err := f.svc.RequestSync(f.ctx, admin, f.orgID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("sync of an organisation without a connection: %v", err)
	}
	srv := fakeLangfuse(t)
	f.connect(t, srv.URL, srv.SecretKey)
	if queued, err := f.svc.RequestSync(f.ctx, admin, f.orgID); err != nil || !queued {
		t.Fatalf("sync now: queued %v, %v", queued, err)
	}
	if queued, err := f.svc.RequestSync(f.ctx, admin, f.orgID); err != nil || queued {
		t.Fatalf("a second sync now while one waits: queued %v, %v", queued, err)
	}
	if err := f.svc.QueueSyncs(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, "SELECT count(*) FROM river_job WHERE kind = 'langfuse_sync' AND args->>'org_id' = $1", f.orgID.String()); n != 1 {
		t.Fatalf("%d sync jobs waiting, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM audit_log WHERE action = 'langfuse.sync_requested'"); n != 2 {
		t.Fatalf("%d audit entries for the two requests, want 2", n)
	}
}

// A host on a loopback, private, link-local or metadata address is refused
// when it is saved, beside the host field, with outbound's sentence; nothing
// is stored or audited. Link-local and metadata addresses stay refused when
// the operator allows loopback.
func TestSaveConnectionRefusesInternalAddresses(t *testing.T) {
	f := newEnv(t)
	srv := fakeLangfuse(t)
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	cases := []struct{ host, policy, want string }{
		{srv.URL, "", "CURATE_OUTBOUND_ALLOW"},
		{"http://localhost:" + port, "", "CURATE_OUTBOUND_ALLOW"},
		{"http://[::1]:" + port, "", "CURATE_OUTBOUND_ALLOW"},
		{"http://10.0.0.5:3000", "", "CURATE_OUTBOUND_ALLOW"},
		{"https://192.168.10.2", "127.0.0.0/8", "CURATE_OUTBOUND_ALLOW"},
		{"http://169.254.169.254", "127.0.0.0/8,10.0.0.0/8", "link-local or cloud metadata"},
		{"http://[fe80::1]:3000", "127.0.0.0/8", "link-local or cloud metadata"},
	}
	for _, c := range cases {
		f.svc.Outbound = allow(t, c.policy)
		_, err := f.svc.SaveConnection(f.ctx, admin, f.orgID, imports.ConnectionInput{Host: c.host, PublicKey: srv.PublicKey, SecretKey: srv.SecretKey})
		var inv *errs.Invalid
		if !errors.As(err, &inv) || !strings.Contains(inv.ByField()["host"], c.want) {
			t.Errorf("saving host %s under %q: %v; want a host error saying %q", c.host, c.policy, err, c.want)
			continue
		}
		if msg := inv.ByField()["host"]; strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "169.254") {
			t.Errorf("the message names the address: %q", msg)
		}
	}
	if _, err := f.svc.Connection(f.ctx, f.orgID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("a refused host was stored: %v", err)
	}
	if n := f.count(t, "SELECT count(*) FROM audit_log WHERE action = 'langfuse.connection_save'"); n != 0 {
		t.Errorf("%d audit entries for refused saves", n)
	}
	if n := srv.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("saving called Langfuse %d times", n)
	}
}

// The sync checks the address on every call: a host saved while allowed
// and refused since (the policy changed, or its name now resolves
// elsewhere) fails with outbound's sentence, recorded and returned.
func TestSyncChecksTheAddressAgain(t *testing.T) {
	f := newEnv(t)
	srv := fakeLangfuse(t)
	f.connect(t, srv.URL, srv.SecretKey)
	f.svc.Outbound = allow(t, "")
	_, err := f.svc.Sync(f.ctx, f.orgID)
	var refused *outbound.RefusedError
	var fail *imports.LangfuseError
	if !errors.As(err, &refused) || !errors.As(err, &fail) {
		t.Fatalf("Sync = %v, want a refused address", err)
	}
	conn, _ := f.svc.Connection(f.ctx, f.orgID)
	if !strings.HasPrefix(conn.LastError, "Reading scores failed: This address is on a private or loopback network") || strings.Contains(conn.LastError, "127.0.0.1") {
		t.Errorf("last error %q", conn.LastError)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3); n != 0 {
		t.Errorf("the refused host got %d requests", n)
	}
}

// A host allowed by its name (localhost) that redirects to an address the
// policy refuses (127.0.0.1) is followed no further.
func TestSyncRefusesARedirectToARefusedAddress(t *testing.T) {
	f := newEnv(t)
	srv := fakeLangfuse(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	fu, _ := url.Parse(front.URL)
	f.svc.Outbound = allow(t, "localhost")
	f.connect(t, "http://localhost:"+fu.Port(), srv.SecretKey)
	_, err := f.svc.Sync(f.ctx, f.orgID)
	var refused *outbound.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Sync = %v, want the redirect refused", err)
	}
	if err := f.svc.TestConnection(f.ctx, f.orgID); !errors.As(err, &refused) {
		t.Fatalf("TestConnection = %v, want the redirect refused", err)
	}
	conn, _ := f.svc.Connection(f.ctx, f.orgID)
	if !strings.Contains(conn.LastError, "CURATE_OUTBOUND_ALLOW") || strings.Contains(conn.LastError, "127.0.0.1") {
		t.Errorf("last error %q", conn.LastError)
	}
	if n := srv.Requests(langfusetest.EndpointScoresV3) + srv.Requests(langfusetest.EndpointProjects); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// What a failing Langfuse answers is stored nowhere: not in the
// connection's last error, the audit log or River's job records.
func TestLangfuseAnswerIsStoredNowhere(t *testing.T) {
	const marker = "REMOTE-BODY-MARKER-91c4"
	f := newEnv(t)
	srv := langfusetest.NewServer(t, langfusetest.Options{FailMessage: marker})
	f.connect(t, srv.URL, srv.SecretKey)
	srv.FailNext(langfusetest.EndpointProjects, http.StatusInternalServerError, 10)
	srv.FailNext(langfusetest.EndpointScoresV3, http.StatusInternalServerError, 10)
	err := f.svc.TestConnection(f.ctx, f.orgID)
	if err == nil || strings.Contains(err.Error(), marker) {
		t.Fatalf("TestConnection = %v", err)
	}
	_, err = f.svc.Sync(f.ctx, f.orgID)
	if err == nil || strings.Contains(err.Error(), marker) {
		t.Fatalf("Sync = %v", err)
	}
	conn, _ := f.svc.Connection(f.ctx, f.orgID)
	if !strings.HasPrefix(conn.LastError, "Reading scores failed: The server answered 500 Internal Server Error.") {
		t.Errorf("last error %q", conn.LastError)
	}
	if found := pgtest.TablesContaining(t, f.pool, marker); len(found) > 0 {
		t.Errorf("the remote body is stored in %v", found)
	}
	if found := pgtest.TablesContaining(t, f.pool, "Internal Server Error"); !slices.Contains(found, "langfuse_connections") {
		t.Errorf("the failure is not recorded (found in %v)", found)
	}
}
