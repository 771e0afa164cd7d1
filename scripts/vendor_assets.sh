#!/usr/bin/env bash
# Fetch the browser assets the dashboard serves itself (no CDN) from the npm
# registry with `npm pack`, at pinned versions, and copy them with their
# licence into pgbus_web/web/static/vendor/; and the test-only assets (axe-core,
# which the browser tests inject into every page) into tests/vendor/, which is
# never served. The vendored files are committed; run this again only to
# change a version.
set -euo pipefail
cd "$(dirname "$0")/.."

# htmx 2.0 line: the 4.0 line changes attribute semantics, so the pages are
# written against 2.0.
HTMX_VERSION="2.0.11"
# idiomorph's htmx extension ("morph" swap): live refresh merges the new
# fragment into the old one, so a focused element stays focused.
IDIOMORPH_VERSION="0.8.0"
# axe-core: the accessibility rules the browser tests hold every page to.
AXE_VERSION="4.14.1"

dest="pgbus_web/web/static/vendor"
tests_dest="tests/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch NAME VERSION -> unpacked into $work/NAME/package
  mkdir -p "$work/$1"
  (cd "$work/$1" && npm pack --silent "$1@$2" >/dev/null)
  tar -xzf "$work/$1/$1-$2.tgz" -C "$work/$1"
}

licence() {  # licence NAME -> the package.json's licence field
  node -p "require('$work/$1/package/package.json').license"
}

fetch htmx.org "$HTMX_VERSION"
fetch idiomorph "$IDIOMORPH_VERSION"
fetch axe-core "$AXE_VERSION"

mkdir -p "$dest" "$tests_dest"
cp "$work/htmx.org/package/dist/htmx.min.js" "$dest/htmx.min.js"
cp "$work/htmx.org/package/LICENSE" "$dest/htmx.LICENSE"
cp "$work/idiomorph/package/dist/idiomorph-ext.min.js" "$dest/idiomorph-ext.min.js"
cp "$work/idiomorph/package/LICENSE" "$dest/idiomorph.LICENSE"
{
  printf 'htmx.org %s (npm), license %s\n' "$HTMX_VERSION" "$(licence htmx.org)"
  printf 'idiomorph %s (npm), license %s\n' "$IDIOMORPH_VERSION" "$(licence idiomorph)"
} > "$dest/VERSIONS"

cp "$work/axe-core/package/axe.min.js" "$tests_dest/axe.min.js"
cp "$work/axe-core/package/LICENSE" "$tests_dest/axe-core.LICENSE"
printf 'axe-core %s (npm), license %s; test asset, never served\n' "$AXE_VERSION" "$(licence axe-core)" \
  > "$tests_dest/VERSIONS"
echo "vendored htmx.org@${HTMX_VERSION}, idiomorph@${IDIOMORPH_VERSION} into $dest; axe-core@${AXE_VERSION} into $tests_dest"
