#!/usr/bin/env bash
# Sets lode up from a fresh clone and runs its main job on the bundled example vault:
# build (dev profile: the release build takes far longer), index fixtures/vault, then search it.
# Idempotent: a second run rebuilds nothing and re-indexes only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain

echo "==> building lode ($(lode_elapsed))"
cargo build --locked -p lode
LODE=target/debug/lode
VAULT=fixtures/vault

echo "==> indexing $VAULT ($(lode_elapsed))"
"$LODE" index --vault "$VAULT"

QUESTION="${1:-How often are staging certificates rotated?}"
echo "==> lode search \"$QUESTION\" ($(lode_elapsed))"
"$LODE" search --vault "$VAULT" --limit 5 "$QUESTION"
echo "==> done in $(lode_elapsed); try: $LODE search --vault $VAULT <question>"
