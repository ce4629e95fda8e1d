//! The rule of the house (docs/architecture.md): imports point down. Nothing below the API
//! layer (every module but `api`, `http`, the composition root `app`, `cli`, `main` and
//! `lib`) names `api`, `http`, `app` or `cli`; and `api` does not name `http`. Checked by
//! reading the sources, so a new upward import fails here, not in a review months later.

use std::path::{Path, PathBuf};

/// Top-level modules that may import anything: the edge and the composition root.
const UPPER: &[&str] = &["api", "http", "app", "cli", "main", "lib"];
/// What a lower module must not name. `app` and `cli` too: they sit above everything.
const FORBIDDEN_BELOW: &[&str] = &["api", "http", "app", "cli"];
/// What `api/` must not name: `http` is the layer above it.
const FORBIDDEN_IN_API: &[&str] = &["http", "app", "cli"];

/// Upward imports not yet removed, each `(file, the item it names)` with the reason. An
/// entry here is a debt the architecture issue (#15) tracks; the test fails on anything
/// else, and on an entry that is no longer needed, so the list only shrinks.
const ALLOWED: &[(&str, &str)] = &[];

#[test]
fn imports_only_point_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for file in rust_files(&root) {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let module = module_path(&rel);
        let top = module.first().map(String::as_str).unwrap_or("lib");
        let forbidden = match top {
            "api" => FORBIDDEN_IN_API,
            t if UPPER.contains(&t) => continue,
            _ => FORBIDDEN_BELOW,
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for item in upward_imports(&code_only(&text), &module, forbidden) {
            found.push((rel.clone(), item));
        }
    }
    let unexpected: Vec<_> = found
        .iter()
        .filter(|(f, i)| !ALLOWED.iter().any(|(af, ai)| af == f && ai == i))
        .collect();
    assert!(
        unexpected.is_empty(),
        "imports pointing up a layer (see docs/architecture.md; move the item down instead):\n{}",
        unexpected
            .iter()
            .map(|(f, i)| format!("  src/{f}: {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let stale: Vec<_> = ALLOWED
        .iter()
        .filter(|(af, ai)| !found.iter().any(|(f, i)| f == af && i == ai))
        .collect();
    assert!(
        stale.is_empty(),
        "allow-list entries no longer needed, remove them: {stale:?}"
    );
}

/// The checker itself: each way of writing an upward import is caught, and what only looks
/// like one (comments, strings, `axum::http`) is not.
#[test]
fn the_checker_sees_every_spelling() {
    let pipeline = module_path("knowledge/pipeline.rs");
    let caught = |src: &str| upward_imports(&code_only(src), &pipeline, FORBIDDEN_BELOW);
    for src in [
        "use crate::api::genies;",
        "fn f() { crate::http::router(); }",
        "use crate :: api :: x;",
        "use crate::{db, api::genies::sync};",
        "use crate::{\n    db,\n    http,\n};",
        "use crate::{db::{self, x}, app::App};",
        "use super::super::api::x;",
        "use super::super::{db, http::hooks};",
        "use crate::cli::Cli;",
        "use genied::api::x;",
    ] {
        assert!(!caught(src).is_empty(), "missed: {src}");
    }
    for src in [
        "// crate::api::genies",
        "/// calls `crate::http::router`",
        "/* crate::api */ fn f() {}",
        r#"const S: &str = "crate::api::x";"#,
        r##"const S: &str = r#"crate::http"#;"##,
        "use axum::http::StatusCode;",
        "use crate::{db, service::api_keys};",
        "use super::store;",
        "fn f<'a>(x: &'a str) -> char { let _ = x; '\"' } // crate::api",
        "use crate::db::api_keys;",
    ] {
        assert!(
            caught(src).is_empty(),
            "false alarm: {src}: {:?}",
            caught(src)
        );
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `knowledge/pipeline.rs` → `[knowledge, pipeline]`; `knowledge/mod.rs` → `[knowledge]`.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// The source with comments, string and char literals blanked (newlines kept), so that only
/// code is searched.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, b[j]);
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\''), else a lifetime.
            let len = if next == Some('\\') {
                (i + 2..b.len()).find(|&k| b[k] == '\'').map(|k| k + 1 - i)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(n) => i += n,
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every path in `code` that resolves to a top-level module in `forbidden`, as written.
fn upward_imports(code: &str, module: &[String], forbidden: &[&str]) -> Vec<String> {
    let toks = tokens(code);
    let mut found = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        // The path's root, as the crate's top-level module list sees it: `crate`, the crate's
        // own name, or `super` chains resolved from this file (from an inline `mod` one level
        // deeper too, so that `mod tests` cannot hide one).
        let prev_is_path = i > 0 && toks[i - 1] == "::";
        let start = match t {
            "crate" | "genied" if !prev_is_path => Some(vec![0usize]),
            "super" if !prev_is_path => {
                let mut n = 0;
                let mut j = i;
                while toks.get(j).map(String::as_str) == Some("super")
                    && toks.get(j + 1).map(String::as_str) == Some("::")
                {
                    n += 1;
                    j += 2;
                }
                // Depth of the module the path resolves to, for the file and for a `mod` in it.
                let depths: Vec<usize> = [module.len(), module.len() + 1]
                    .iter()
                    .filter_map(|d| d.checked_sub(n))
                    .collect();
                if depths.contains(&0) {
                    // Resolves to the crate root: what follows is a top-level module.
                    i = j - 2;
                    Some(vec![0])
                } else {
                    i = j;
                    None
                }
            }
            _ => None,
        };
        if start.is_some() && toks.get(i + 1).map(String::as_str) == Some("::") {
            let head = i;
            match toks.get(i + 2).map(String::as_str) {
                Some("{") => {
                    // A group: each top-level member names a top-level module.
                    let mut depth = 0;
                    let mut j = i + 2;
                    let mut expect_name = true;
                    while j < toks.len() {
                        match toks[j].as_str() {
                            "{" => {
                                depth += 1;
                                if depth == 1 {
                                    expect_name = true;
                                }
                            }
                            "}" => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            "," if depth == 1 => expect_name = true,
                            name if depth == 1 && expect_name => {
                                expect_name = false;
                                if forbidden.contains(&name) {
                                    found.push(format!("{}::{{{name}}}", toks[head]));
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    i = j;
                }
                Some(name) if forbidden.contains(&name) => {
                    found.push(format!("{}::{name}", toks[head]));
                    i += 3;
                }
                _ => i += 1,
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Identifiers, `::`, and single punctuation; whitespace dropped.
fn tokens(code: &str) -> Vec<String> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            let s = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[s..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}
