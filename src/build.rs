//! Build script: the migrations are embedded at compile time, so a change under
//! `migrations/` (`sqlite/` and `postgres/`, one set per engine) must rebuild the crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
