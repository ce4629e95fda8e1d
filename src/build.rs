//! Build script: the migrations are embedded at compile time, so a change under
//! `migrations/` (`sqlite/` and `postgres/`, one set per engine) must rebuild the crate.
//!
//! On Linux with glibc the server links with packed relative relocations (`DT_RELR`): a
//! position-independent executable carries one relocation per pointer in its read-only
//! data (about 85,000, 2 MB of `.rela.dyn`), and the loader reads them all at every start,
//! so they stayed resident for the life of the process. Packed, they take 30 KB, and idle
//! RSS drops by 4–5 MB (docs/performance.md, round sixteen). Needs binutils 2.38 or lld
//! 15 to link and glibc 2.36 to run; `GENIED_LINK_RELR=0` links without it.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=GENIED_LINK_RELR");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    let wanted = std::env::var("GENIED_LINK_RELR").as_deref() != Ok("0");
    if linux_gnu && wanted {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
