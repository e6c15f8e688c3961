#!/usr/bin/env bash
# Re-create docs/assets/vendor/ (Mermaid) from the npm registry at the pinned version below.
# The result is committed: the site loads nothing from the internet at run time, and
# neither `make serve` nor `make test` runs this. Run it only to change the version.
# MathJax is not vendored: it runs at build time only, from tools/ (pinned in
# tools/package.json, installed by `npm ci --prefix tools`; see hooks/prerender_math.py).
#
# The weekly drift run (make test-latest) vendors the newest release instead:
#   MERMAID=latest scripts/vendor-js.sh
set -euo pipefail

MERMAID_VERSION=11.17.2   # Material 9.8 is built against mermaid 11
version=${MERMAID:-$MERMAID_VERSION}

root=$(cd "$(dirname "$0")/.." && pwd)
vendor="$root/docs/assets/vendor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/mermaid"
(cd "$work/mermaid" && npm pack --silent "mermaid@$version" >/dev/null && tar xzf ./*.tgz)
mm="$work/mermaid/package"
version=$(node -p "require('$mm/package.json').version")  # "latest" -> the number

rm -rf "$vendor"
mkdir -p "$vendor/mermaid/chunks/mermaid.esm.min"

# Mermaid: the ES module build. Its entry is 30 kB and pulls in only the chunks a page's
# diagram types need (about 1 MB for a flowchart), where the UMD bundle is 3.5 MB.
cp "$mm/dist/mermaid.esm.min.mjs" "$vendor/mermaid/"
find "$mm/dist/chunks/mermaid.esm.min" -name '*.mjs' -exec cp {} "$vendor/mermaid/chunks/mermaid.esm.min/" \;
cp "$mm/LICENSE" "$vendor/mermaid/LICENSE"

cat > "$vendor/VERSIONS" <<TXT
mermaid $version (npm, MIT)
TXT
du -sh "$vendor"/*
