//! Build script: the migrations are embedded at compile time, so a change under
//! `migrations/` must rebuild the crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
