#!/usr/bin/env bash
# Prints the path of a SeaweedFS binary (`weed`), the S3-compatible server the
# blob store and scale-out tests run against, building it on first use.
#
# SeaweedFS's module has replace directives, so `go install ...@version` is
# refused; its source is taken from the module cache and built in a copy.
# A cold build takes about 9 CPU-minutes (5 minutes or more on 2 cores, far
# longer on a busy machine; a rebuild with Go's build cache warm, under a
# minute) and gives a binary of about 165 MB, kept in $CURATE_TOOLS
# (default ~/.cache/curate) and reused while the pinned version stays the
# same. CURATE_S3_SERVER, when set to an
# executable, is used as it is.
set -euo pipefail

version=v0.0.0-20261109003541-7506e5f91cd6
module=github.com/seaweedfs/seaweedfs

if [ -n "${CURATE_S3_SERVER:-}" ] && [ -x "$CURATE_S3_SERVER" ]; then
  echo "$CURATE_S3_SERVER"; exit 0
fi
dir="${CURATE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/curate}/seaweedfs-$version"
bin="$dir/weed"
if [ -x "$bin" ]; then
  echo "$bin"; exit 0
fi

mkdir -p "$dir"
# Test binaries of several packages may ask at once: one builds, the
# others wait for it and reuse the binary.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
  if [ -x "$bin" ]; then
    echo "$bin"; exit 0
  fi
fi

go=${GO:-go}
echo "s3server: building SeaweedFS $version into $dir (minutes, once)" >&2
src=$($go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "s3server: the module cache has no source for $module@$version" >&2; exit 1
fi
work=$(mktemp -d "$dir/build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -R "$src/." "$work/"
chmod -R u+w "$work"
# GOFLAGS from the caller (-mod=vendor, tags) are for Curate, not SeaweedFS.
# (Not -o "$work/weed": that is the source's weed/ directory.)
(cd "$work" && GOFLAGS= GOWORK=off CGO_ENABLED=0 $go build -trimpath -ldflags='-s -w' -o "$dir/weed.part" ./weed) >&2
mv "$dir/weed.part" "$bin"
echo "$bin"
