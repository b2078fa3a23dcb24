#!/usr/bin/env bash
# A platform-specific .vsix with the lode binary inside (as rust-analyzer ships its server):
#   scripts/package-platform.sh TARGET BINARY   (TARGET: linux-x64, linux-arm64, darwin-x64,
#   darwin-arm64, win32-x64; BINARY: that platform's dist build of lode)
# writes lode-<version>-<TARGET>.vsix. The extension runs the binary at server/lode(.exe) only
# when the user has no lode of their own (lode.path unset, none on PATH): see src/binary.ts,
# chooseBinary. Run after `npm ci`.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: package-platform.sh TARGET BINARY}
binary=${2:?usage: package-platform.sh TARGET BINARY}
case "$target" in
    linux-x64|linux-arm64|darwin-x64|darwin-arm64) exe=lode ;;
    win32-x64|win32-arm64) exe=lode.exe ;;
    *) echo "error: unknown target $target" >&2; exit 2 ;;
esac
version=$(node -p "require('./package.json').version")
rm -rf server
mkdir server
trap 'rm -rf server' EXIT
cp "$binary" "server/$exe"
chmod +x "server/$exe"
npx vsce package --no-dependencies --target "$target" -o "lode-$version-$target.vsix"
node scripts/check-vsix.js "lode-$version-$target.vsix"
node -e "
const yauzl = require('yauzl');
yauzl.open(process.argv[1], (e, z) => { if (e) throw e; let found = false;
  z.on('entry', (x) => { if (x.fileName === 'extension/server/' + process.argv[2]) found = true; });
  z.on('end', () => { if (!found) { console.error('the binary is not in the package'); process.exit(1); } console.log('package-platform: server/' + process.argv[2] + ' is in ' + process.argv[1]); }); });
" "lode-$version-$target.vsix" "$exe"
