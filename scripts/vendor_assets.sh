#!/usr/bin/env bash
# Fetch the browser assets the dashboard serves itself (no CDN) from the npm
# registry with `npm pack`, at pinned versions, and copy them with their
# licence into pgbus_web/web/static/vendor/. The vendored files are committed;
# run this again only to change a version.
set -euo pipefail
cd "$(dirname "$0")/.."

# htmx 2.0 line: the 4.0 line changes attribute semantics, so the pages are
# written against 2.0.
HTMX_VERSION="2.0.11"

dest="pgbus_web/web/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "htmx.org@${HTMX_VERSION}" >/dev/null)
tar -xzf "$work/htmx.org-${HTMX_VERSION}.tgz" -C "$work"

mkdir -p "$dest"
cp "$work/package/dist/htmx.min.js" "$dest/htmx.min.js"
cp "$work/package/LICENSE" "$dest/htmx.LICENSE"
printf 'htmx.org %s (npm), license %s\n' "$HTMX_VERSION" \
  "$(node -p "require('$work/package/package.json').license")" > "$dest/VERSIONS"
echo "vendored htmx.org@${HTMX_VERSION} into $dest"
