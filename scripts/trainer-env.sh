#!/usr/bin/env bash
# Prints the absolute path of the Python of the trainer's environment: a
# venv with exactly the packages of trainer/requirements.lock, created on
# first use in $CURATE_TOOLS (default ~/.cache/curate) as
# trainer-env-<first 12 hex digits of the lock's sha256> and reused while the
# lock stays the same. It also points $CURATE_TOOLS/trainer-python at that
# Python (a script that runs it), which is where Curate's local worker looks
# for its trainer by default.
#
# The install is pip's, from the lock alone: --require-hashes (every file is
# checked against the lock), --no-deps (nothing outside the lock) and
# --only-binary (no builds). torch's Linux wheel pulls NVIDIA's CUDA runtime
# packages, so a cold install downloads about 3 GB; see trainer/README.md for
# the time it takes. Callers running at once wait for one install (flock);
# the venv is built in a temporary directory and renamed into place, so a
# half-built one is never used.
#
# CURATE_TRAINER_BASE_PYTHON picks the interpreter the venv is made from
# (default python3, 3.11 or newer). CURATE_TRAINER_ENV_PIP_ARGS adds pip
# options (a --cache-dir, a --find-links).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lock="$root/trainer/requirements.lock"
tools="${CURATE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/curate}"
key=$(sha256sum "$lock" | cut -c1-12)
dir="$tools/trainer-env-$key"
py="$dir/bin/python"
link="$tools/trainer-python"

# Points trainer-python at this environment's Python, replaced in one
# rename so a reader never sees it missing. It is a two-line script, not a
# symbolic link: a venv's Python finds its packages only when it is started
# from inside the venv.
publish() {
  local tmp="$link.tmp.$$"
  printf '#!/bin/sh\nexec %q "$@"\n' "$py" > "$tmp"
  chmod 755 "$tmp"
  mv -Tf "$tmp" "$link"
  echo "$py"
}

ready() { [ -x "$py" ] && [ -f "$dir/.complete" ]; }

if ready; then publish; exit 0; fi

mkdir -p "$tools"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$tools/trainer-env-$key.lock"
  flock 9
  if ready; then publish; exit 0; fi
fi

base="${CURATE_TRAINER_BASE_PYTHON:-python3}"
if ! "$base" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "trainer-env: $base is missing or older than Python 3.11" >&2; exit 1
fi
if ! "$base" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "trainer-env: $base cannot make a venv with pip (on Debian: apt-get install python3-venv)" >&2; exit 1
fi

echo "trainer-env: installing trainer/requirements.lock into $dir (about 3 GB, once)" >&2
work=$(mktemp -d "$tools/trainer-env-$key.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$base" -m venv "$work"
# shellcheck disable=SC2086
"$work/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
  --require-hashes --no-deps --only-binary :all: ${CURATE_TRAINER_ENV_PIP_ARGS:-} \
  -r "$lock" >&2
# Scripts in bin/ name the directory they were installed in; they move with it.
grep -rlI --null -- "$work" "$work/bin" | xargs -0r sed -i "s#$work#$dir#g"
"$work/bin/python" -c 'import torch, transformers, peft, trl, accelerate, tokenizers, safetensors' >&2
touch "$work/.complete"
rm -rf "$dir"
mv -T "$work" "$dir"
trap - EXIT
publish
