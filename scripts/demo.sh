#!/usr/bin/env bash
# Sets lode up from a fresh clone and runs its main job on the bundled example vault:
# build (dev profile: the release build takes far longer), index fixtures/vault, then ask it a
# question and print the verified answer with its citations.
# Idempotent: a second run rebuilds nothing and re-indexes only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
ensure_models

echo "==> building lode ($(lode_elapsed))"
cargo build --locked -p lode
LODE="${CARGO_TARGET_DIR:-target}/debug/lode"
VAULT=fixtures/vault

# The example vault is your own checkout's: approve it, visibly, as you would a folder you
# trust (docs/security.md). lode prints what it approves.
echo "==> lode trust --vault $VAULT ($(lode_elapsed))"
"$LODE" trust --vault "$VAULT"

echo "==> indexing $VAULT ($(lode_elapsed))"
"$LODE" index --vault "$VAULT"

QUESTION="${1:-How often are staging certificates rotated?}"
echo "==> lode ask \"$QUESTION\" ($(lode_elapsed))"
"$LODE" ask --vault "$VAULT" "$QUESTION"
echo "==> done in $(lode_elapsed). Try: $LODE ask --vault $VAULT \"<question>\"  or  $LODE search --vault $VAULT <words>"
