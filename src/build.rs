//! Build script: the migrations are embedded at compile time, so a change under
//! `migrations/` or `migrations-pg/` must rebuild the crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-pg");
}
