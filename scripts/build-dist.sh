#!/usr/bin/env bash
# The binary users download: target/dist/lode (or target/<triple>/dist/lode with --target).
#   scripts/build-dist.sh [--target TRIPLE]
#   scripts/build-dist.sh --rustc-args      (prints the final link's flags, for `maturin build -- …`)
# The `dist` profile (Cargo.toml) compiles the cold dependencies for size and the index and
# query paths at opt-level 3. What a profile cannot carry is added here, for the final link only
# (`cargo rustc`), on x86_64 Linux where rustc links with its own lld:
# - `--icf=all`: identical functions (the same generic code instantiated in many crates) kept once;
# - a non-PIE executable (`-C relocation-model=static`): nothing to relocate at start, so the
#   loader touches none of the binary's pages before `main` (docs/benchmarks.md, "The dist binary":
#   `initialize` 6.1 → 2.3 ms). The price: the executable's own code is not address-randomised
#   (shared libraries, heap and stack still are);
# - `-C strip=symbols`: the profile's `strip = true` reaches rustc as `-C strip=debuginfo` once
#   packages have their own opt-level.
# Elsewhere the profile alone applies. Release CI (.github/workflows/release.yml) runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
target=""
print_only=""
if [ "${1:-}" = "--rustc-args" ]; then
    print_only=1
elif [ "${1:-}" = "--target" ]; then
    target=${2:?usage: build-dist.sh [--target TRIPLE]}
fi
host=$(rustc -vV | sed -n 's/^host: //p')
triple=${target:-$host}
extra=()
if [ "$triple" = "x86_64-unknown-linux-gnu" ]; then
    extra=(-C link-arg=-Wl,--icf=all -C relocation-model=static -C strip=symbols)
fi
if [ -n "$print_only" ]; then
    echo "${extra[@]}"
    exit 0
fi
args=(--locked --profile dist -p lode --bin lode)
if [ -n "$target" ]; then
    args+=(--target "$target")
fi
if [ ${#extra[@]} -gt 0 ]; then
    cargo rustc "${args[@]}" -- "${extra[@]}"
else
    cargo build "${args[@]}"
fi
out=target/${target:+$target/}dist/lode
[ -f "$out" ] || out="$out.exe"
echo "build-dist: $out ($(du -h "$out" | cut -f1))"
