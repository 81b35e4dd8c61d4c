// Package static holds Curate's CSS, scripts and the vendored front-end
// libraries (versions in their file names; `make assets` fetches them),
// embedded in the binary.
package static

import "embed"

// FS is served under /static/.
//
//go:embed css js vendor favicon.svg
var FS embed.FS
