#!/usr/bin/env bash
# Re-vendors the Markdown parser the chat page renders replies with (markdown-it, MIT), from
# npm at a pinned version: `serve` embeds it, so the pages make no external request. Run it to
# move to a newer release (change VERSION), then run the page tests.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="15.0.3"
OUT=src/http/console/vendor
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "markdown-it@$VERSION" >/dev/null && tar xzf "markdown-it-$VERSION.tgz")
{
  # The licence travels with the code that is served.
  echo "/*! markdown-it $VERSION"
  sed 's/^/ * /' "$work/package/LICENSE"
  echo " */"
  # The source map is not served: drop the line naming it.
  grep -v '^//# sourceMappingURL=' "$work/package/dist/browser/markdown-it.umd.min.js"
} > "$OUT/markdown-it.min.js"
echo "vendored markdown-it $VERSION into $OUT"
