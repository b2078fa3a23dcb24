#!/usr/bin/env bash
# Runs the whole test suite (dev profile). Used by CI (.ci/run) and by developers alike.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
ensure_models
ensure_test_tools
ensure_neovim
ensure_emacs
ensure_vscode_package
# Style first: formatting (rustfmt.toml) and lints as errors (allowed lints: Cargo.toml).
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all -- --check
else
    echo "tests: rustfmt is not installed with this toolchain; the format check is skipped" >&2
fi
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --workspace --all-targets --locked -- -D warnings
else
    echo "tests: clippy is not installed with this toolchain; the lint check is skipped" >&2
fi
build_wheel
build_platform_vsix
cargo test --workspace --locked "$@"
