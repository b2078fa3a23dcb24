//! Link settings of the `lode` binary.
//!
//! Relative relocations packed (`DT_RELR`, GNU ld ≥ 2.38 with glibc ≥ 2.36; older linkers
//! ignore the option with a warning): the binary's ~370,000 relative relocations took a 9 MB
//! `.rela.dyn` table that the loader reads at every start and that then stayed resident for
//! the process's life (docs/benchmarks.md, "Memory"); packed, they take a few hundred KB.
//! Only this crate's binaries are linked so: dependencies are compiled exactly as before.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
