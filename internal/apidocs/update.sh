#!/usr/bin/env bash
# Vendors Redoc's standalone bundle, which GET /docs serves (apidocs.go), at
# the version pinned below: npm pack fetches the package's tarball from the
# registry and checks it against the registry's integrity hash; this script
# then checks it against the hash pinned here, so the bytes in vendor/ are
# the ones reviewed. To move to another version, change both lines, run the
# script, look at /docs and commit vendor/.
#
# Usage: internal/apidocs/update.sh   (needs npm; nothing else runs npm)
set -euo pipefail

version=2.5.4
sha256=dcaf76612bc4a3fbcc923a8966dee2f6146a5f32e5ce1b6f02dd60cbbf89500b

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
(cd "$tmp" && npm pack --silent "redoc@$version" >/dev/null)
tar -xzf "$tmp/redoc-$version.tgz" -C "$tmp"
got=$(sha256sum "$tmp/package/bundles/redoc.standalone.js" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
	echo "update.sh: redoc $version's bundle has sha256 $got, not the pinned $sha256" >&2
	exit 1
fi
mkdir -p "$here/vendor"
cp "$tmp/package/bundles/redoc.standalone.js" "$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" "$here/vendor/"
cp "$tmp/package/LICENSE" "$here/vendor/LICENSE"
echo "redoc $version" >"$here/vendor/VERSION"
echo "vendored redoc $version into $here/vendor"
