// Package dynalite starts and stops dynalite, the DynamoDB-compatible server
// from npm (pinned in package-lock.json), for tests.
//
// The server runs as a child process on a free 127.0.0.1 port. Run keeps its
// data in a LevelDB directory, so Stop and Restart keep the tables and items:
// a fault test can take the server away mid-run and bring it back on the
// same endpoint. Shared, one server for a whole test binary, keeps its data
// in memory.
//
// When node_modules/.bin/dynalite is missing (npm ci has not run), tests that
// need it fail when the environment variable CI is "true" and skip with the
// reason otherwise.
package dynalite
