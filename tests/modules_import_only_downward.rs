//! The crate's rooms stack in one direction (`docs/architecture.md`): a module uses only the
//! modules below it, never one above or beside it. This test reads every `crate::` path in the
//! library's code (comments left out) and names each one that runs against that direction, so a
//! back-edge fails here rather than in a review.
//!
//! The same for the HTTP gateway's insides: a route handler is used only by the router
//! (`src/http.rs`) and the OpenAPI document; handlers share only the gateway's bottom modules.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Floors, top first. A module may use modules on lower floors only (and itself).
const FLOORS: &[&[&str]] = &[
    &["fuzzing"],
    &["http"],
    &["channel"],
    &["runtime"],
    &["registry"],
    &["session"],
    &["stream"],
    &["error"],
    &["agent"],
    &["context"],
    &["config"],
    &["memory", "artifact", "state_keys"],
    &["call"],
    &["store"],
    &["backend"],
    &["state"],
    &["key", "hex", "stats", "atomic_file", "parse"],
];

/// The gateway's route handlers: each is used only by the router and the OpenAPI document (which
/// only the router uses).
const HANDLERS: &[&str] = &[
    "admin",
    "artifacts",
    "channels",
    "console",
    "events",
    "openai",
    "ops",
    "sessions",
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file with its comments left out: `//` comments, doc comments included (their
/// links name modules without using them).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(number, line)| {
        let code = line.split("//").next().unwrap_or("");
        (!code.trim().is_empty()).then_some((number + 1, code))
    })
}

/// The names that follow `prefix` in `line`: `crate::a::b` gives `a` for the prefix `crate::`.
fn names_after<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `foocrate::` is not a path of this crate
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        names.push(&rest[..end]);
    }
    names
}

/// Every library source file (the binary's `main.rs` and `cli/` are users of the library, not
/// part of it), with its top module.
fn library_files(src: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(src).expect("under src").to_owned();
            let first = relative
                .components()
                .next()?
                .as_os_str()
                .to_str()?
                .to_owned();
            let module = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
            (!matches!(module.as_str(), "main" | "cli" | "lib")).then_some((module, path))
        })
        .collect()
}

#[test]
fn every_module_uses_only_the_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut against: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unknown = Vec::new();
    let files = library_files(&src);
    assert!(files.len() > 100, "found only {} source files", files.len());
    for (module, path) in &files {
        let Some(own) = floor_of(module) else {
            unknown.push(format!("{} (module `{module}`)", path.display()));
            continue;
        };
        let text = fs::read_to_string(path).expect("readable source");
        for (number, line) in code_lines(&text) {
            for used in names_after(line, "crate::") {
                if used == module || used.is_empty() {
                    continue;
                }
                match floor_of(used) {
                    Some(floor) if floor > own => {}
                    _ => against
                        .entry(format!("{module} -> {used}"))
                        .or_default()
                        .push(format!("{}:{number}", path.display())),
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules on no floor (add them to FLOORS and to docs/architecture.md): {unknown:#?}"
    );
    assert!(
        against.is_empty(),
        "imports against the direction of the floors (FLOORS above, docs/architecture.md):\n{}",
        against
            .iter()
            .map(|(edge, at)| format!("  {edge}: {}", at.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn only_the_router_and_the_openapi_document_use_a_route_handler() {
    let http = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
    let mut files = Vec::new();
    rust_files(&http, &mut files);
    let mut found = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&http).expect("under src/http");
        let own = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|name| name.strip_suffix(".rs").unwrap_or(name).to_owned())
            .expect("a file name");
        let may_use_handlers = own == "openapi";
        let text = fs::read_to_string(path).expect("readable source");
        let depth = relative.components().count();
        for (number, line) in code_lines(&text) {
            // A sibling is `super::x` from a file directly under src/http, and
            // `super::super::x` one folder further down; `crate::http::x` from anywhere.
            let mut used = names_after(line, "crate::http::");
            if depth == 1 {
                used.extend(names_after(line, "super::"));
            } else if depth == 2 {
                used.extend(names_after(line, "super::super::"));
            }
            for name in used {
                let handler = HANDLERS.contains(&name) && !may_use_handlers;
                if (handler || name == "openapi") && name != own {
                    found.push(format!("{}:{number} uses `{name}`", path.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "route handlers used by other than the router and the OpenAPI document (move what \
         they share into a bottom module: error, extract, schema, gateway, …):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_handler_list_matches_the_router() {
    // HANDLERS above names what the router declares as its route handlers.
    let router = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http.rs"))
        .expect("src/http.rs");
    for handler in HANDLERS {
        assert!(
            router.contains(&format!("mod {handler};")),
            "src/http.rs declares no `mod {handler};` (keep HANDLERS in step with the router)"
        );
    }
}

#[test]
fn the_checks_see_a_back_edge_when_there_is_one() {
    assert_eq!(
        names_after("use crate::store::Store;", "crate::"),
        ["store"]
    );
    assert_eq!(
        names_after("let x = foocrate::a;", "crate::"),
        Vec::<&str>::new()
    );
    assert_eq!(
        code_lines("/// [x](crate::http)\nuse crate::key; // crate::http\n")
            .map(|(n, l)| (n, l.trim()))
            .collect::<Vec<_>>(),
        [(2, "use crate::key;")]
    );
    assert!(floor_of("store").unwrap() > floor_of("session").unwrap());
    assert!(floor_of("http").unwrap() < floor_of("channel").unwrap());
}
