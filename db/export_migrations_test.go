package db

// EmbeddedMigrations is the migrations' file system, for tests that step
// through them.
var EmbeddedMigrations = migrationFS
