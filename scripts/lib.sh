# Shared helpers for lode's scripts. Sourced, not run.

ensure_toolchain() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "error: cargo not found; install a Rust toolchain (https://rustup.rs) and retry" >&2
        exit 1
    fi
}

# Seconds since the script started, for progress lines.
lode_elapsed() {
    echo $(( SECONDS ))s
}
