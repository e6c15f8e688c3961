#!/usr/bin/env bash
# Re-create tests/vendor/axe-core/ from the npm registry at the pinned version below.
# The result is committed: the browser tests inject axe from this local file, so neither
# `make test` nor CI needs npm or the internet. Run this only to change the version.
set -euo pipefail

AXE_VERSION=4.14.1

here=$(cd "$(dirname "$0")" && pwd)
dest="$here/axe-core"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "axe-core@$AXE_VERSION" >/dev/null && tar xzf ./*.tgz)

rm -rf "$dest"
mkdir -p "$dest"
cp "$work/package/axe.min.js" "$work/package/LICENSE" "$dest/"
echo "axe-core $AXE_VERSION (npm, MPL-2.0)" > "$dest/VERSION"
du -sh "$dest"/*
