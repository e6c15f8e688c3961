#!/usr/bin/env bash
# Re-create docs/assets/vendor/ from the npm registry at the pinned versions below.
# The result is committed: the site loads nothing from the internet at run time, and
# neither `make serve` nor `make test` needs npm. Run this only to change a version.
set -euo pipefail

MATHJAX_VERSION=3.2.2
MERMAID_VERSION=11.17.2   # Material 9.8 is built against mermaid 11

root=$(cd "$(dirname "$0")/.." && pwd)
vendor="$root/docs/assets/vendor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch NAME VERSION -> unpacks into $work/NAME/package
  mkdir -p "$work/$1"
  (cd "$work/$1" && npm pack --silent "$1@$2" >/dev/null && tar xzf ./*.tgz)
}

fetch mathjax "$MATHJAX_VERSION"
fetch mermaid "$MERMAID_VERSION"

rm -rf "$vendor"
mkdir -p "$vendor/mathjax/output/chtml/fonts" "$vendor/mathjax/input/tex" "$vendor/mermaid/chunks"

# MathJax: the TeX-to-CommonHTML bundle, its web fonts (else it asks a CDN for them), and the
# TeX extensions it autoloads for less common macros.
mj="$work/mathjax/package"
cp "$mj/es5/tex-chtml.js" "$vendor/mathjax/"
cp -r "$mj/es5/output/chtml/fonts/woff-v2" "$vendor/mathjax/output/chtml/fonts/"
cp -r "$mj/es5/input/tex/extensions" "$vendor/mathjax/input/tex/"
cp "$mj/LICENSE" "$vendor/mathjax/LICENSE"

# Mermaid: the ES module build. Its entry is 30 kB and pulls in only the chunks a page's
# diagram types need (about 1 MB for a flowchart), where the UMD bundle is 3.5 MB.
mm="$work/mermaid/package"
cp "$mm/dist/mermaid.esm.min.mjs" "$vendor/mermaid/"
mkdir -p "$vendor/mermaid/chunks/mermaid.esm.min"
find "$mm/dist/chunks/mermaid.esm.min" -name '*.mjs' -exec cp {} "$vendor/mermaid/chunks/mermaid.esm.min/" \;
cp "$mm/LICENSE" "$vendor/mermaid/LICENSE"

cat > "$vendor/VERSIONS" <<TXT
mathjax $MATHJAX_VERSION (npm, Apache-2.0)
mermaid $MERMAID_VERSION (npm, MIT)
TXT
du -sh "$vendor"/*
