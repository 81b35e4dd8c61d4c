package keyed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/keyed"
	"github.com/curate/curate/internal/secrets"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A keyed row is stored with its key sealed to its organisation and kind,
// its creation audited, and a name its organisation used already refused
// on the name field with nothing stored.
func TestCreate(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	var org, other uuid.UUID
	for slug, id := range map[string]*uuid.UUID{"acme": &org, "globex": &other} {
		if err := pool.QueryRow(ctx, "INSERT INTO organizations (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.New("0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	// The endpoints table stands for any keyed kind's.
	store := keyed.Store{Kind: keyed.Kind{Name: "thing", Table: "endpoints", Noun: "a thing"}, Pool: pool, Secrets: box}
	insert := func(orgID uuid.UUID, name string) func(context.Context, *db.Queries, keyed.Sealed) (db.Endpoint, uuid.UUID, error) {
		return func(ctx context.Context, q *db.Queries, key keyed.Sealed) (db.Endpoint, uuid.UUID, error) {
			e, err := q.EndpointInsert(ctx, db.EndpointInsertParams{OrgID: orgID, Name: name, BaseUrl: "https://api.example.com/v1",
				Model: "m", ApiKeyCiphertext: key.Ciphertext, ApiKeyNonce: key.Nonce, MaxTokens: 1, Concurrency: 1})
			return e, e.ID, err
		}
	}
	sealed := func(e db.Endpoint) keyed.Sealed {
		return keyed.Sealed{Ciphertext: e.ApiKeyCiphertext, Nonce: e.ApiKeyNonce}
	}
	admin := audit.Actor{Kind: "user", ID: uuid.New(), Label: "ada@acme.test"}

	got, err := keyed.Create(ctx, store, admin, org, "one", "sk-secret", map[string]any{"name": "one"}, insert(org, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ApiKeyCiphertext == nil || string(got.ApiKeyCiphertext) == "sk-secret" {
		t.Fatalf("the key was stored as %q", got.ApiKeyCiphertext)
	}
	if key, err := store.Open(org, sealed(got)); err != nil || key != "sk-secret" {
		t.Errorf("Open = %q, %v", key, err)
	}
	// Sealed to the organisation and to the kind.
	if _, err := store.Open(other, sealed(got)); !errors.Is(err, secrets.ErrDecrypt) {
		t.Errorf("another organisation opened the key: %v", err)
	}
	otherKind := store
	otherKind.Name = "widget"
	if _, err := otherKind.Open(org, sealed(got)); !errors.Is(err, secrets.ErrDecrypt) {
		t.Errorf("another kind opened the key: %v", err)
	}
	var action, target string
	if err := pool.QueryRow(ctx, `SELECT action, target_type || ':' || target_id FROM audit_log WHERE org_id = $1`, org).Scan(&action, &target); err != nil {
		t.Fatal(err)
	}
	if action != "thing.create" || target != "thing:"+got.ID.String() {
		t.Errorf("audited %s on %s", action, target)
	}

	// No key: nothing sealed, and nothing to open.
	bare, err := keyed.Create(ctx, store, admin, org, "two", "", nil, insert(org, "two"))
	if err != nil || bare.ApiKeyCiphertext != nil {
		t.Fatalf("a row without a key: %+v, %v", bare, err)
	}
	if key, err := store.Open(org, sealed(bare)); key != "" || err != nil {
		t.Errorf("Open of no key = %q, %v", key, err)
	}

	// The same name again: refused on the name, nothing stored or audited;
	// another organisation may use it.
	_, err = keyed.Create(ctx, store, admin, org, "one", "sk-other", nil, insert(org, "one"))
	var invalid *errs.Invalid
	if !errors.As(err, &invalid) || invalid.ByField()["name"] != `a thing named "one" exists` {
		t.Errorf("a taken name: %v", err)
	}
	if _, err := keyed.Create(ctx, store, admin, other, "one", "", nil, insert(other, "one")); err != nil {
		t.Errorf("another organisation's name: %v", err)
	}
	var rows, entries int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM endpoints WHERE org_id = $1), (SELECT count(*) FROM audit_log WHERE org_id = $1)`, org).Scan(&rows, &entries); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || entries != 2 {
		t.Errorf("%d rows and %d audit entries, want 2 and 2", rows, entries)
	}

	// Without a secret key a key cannot be stored.
	unkeyed := store
	unkeyed.Secrets = nil
	v := &errs.Invalid{}
	unkeyed.CheckKey(v, "sk-x")
	if v.ByField()["api_key"] == "" {
		t.Error("a key was accepted with nothing to seal it")
	}
	if _, err := keyed.Create(ctx, unkeyed, admin, org, "three", "sk-x", nil, insert(org, "three")); !errors.As(err, &invalid) {
		t.Errorf("Create without a secret key: %v", err)
	}
}
