#!/usr/bin/env bash
# Lints the OpenAPI document with the tools its readers use, at the versions
# pinned in package-lock.json: Redocly CLI with the recommended-strict ruleset
# (redocly.yaml) and Spectral with spectral:oas (.spectral.yaml). Any error
# or warning from either fails.
#
# Usage: .ci/lint/lint.sh [document]   (default internal/api/openapi.json)
#
# Needs node >= 20.19 and npm. Installs the linters into .ci/lint/node_modules
# with npm ci (packages cached in ~/.npm) only when package-lock.json changed
# since the last install.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
doc=${1:-$here/../../internal/api/openapi.json}
[ -f "$doc" ] || { echo "lint: no document at $doc" >&2; exit 1; }

# No telemetry, update checks or install-time analytics.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true SCARF_ANALYTICS=false
export NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

# @redocly/cli's engines: node >=20.19 <21, or >=22.12.
node -e '
const [ma, mi] = process.versions.node.split(".").map(Number);
if (!((ma === 20 && mi >= 19) || (ma === 22 && mi >= 12) || ma > 22)) {
  console.error(`lint: node ${process.version} is too old for @redocly/cli (needs 20.19+ or 22.12+)`);
  process.exit(1);
}'

stamp=$here/node_modules/.agentapi-lockfile.sha256
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	echo "lint: npm ci (linters pinned in .ci/lint/package-lock.json)"
	(cd "$here" && npm ci --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
fi
bin=$here/node_modules/.bin

rc=0
echo "--- redocly $("$bin/redocly" --version 2>/dev/null) lint (recommended-strict)"
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bin/redocly" lint --config "$here/redocly.yaml" --format=json "$doc" >"$json" 2>/dev/null || true
if ! totals=$(node -e '
const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const t = r.totals;
if (typeof t?.errors !== "number" || typeof t?.warnings !== "number") throw new Error("no totals");
console.log(`${t.errors} ${t.warnings}`);' "$json"); then
	echo "redocly: no result; its output was:" >&2
	cat "$json" >&2
	exit 1
fi
read -r errors warnings <<<"$totals"
echo "redocly: $errors errors, $warnings warnings"
if [ "$errors" != 0 ] || [ "$warnings" != 0 ]; then
	"$bin/redocly" lint --config "$here/redocly.yaml" --format=stylish "$doc" 2>/dev/null || true
	rc=1
fi

echo "--- spectral $("$bin/spectral" --version) lint (spectral:oas)"
# --fail-severity=warn: a warning fails as an error does.
if ! "$bin/spectral" lint --ruleset "$here/.spectral.yaml" --fail-severity=warn --display-only-failures "$doc"; then
	rc=1
fi
[ "$rc" = 0 ] && echo "openapi lint: 0 errors, 0 warnings from Redocly and Spectral"
exit "$rc"
