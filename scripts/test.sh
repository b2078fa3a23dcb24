#!/usr/bin/env bash
# Runs the whole test suite (dev profile). Used by CI (.ci/run) and by developers alike.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
ensure_models
ensure_test_tools
ensure_neovim
ensure_vscode_package
cargo test --workspace --locked "$@"
