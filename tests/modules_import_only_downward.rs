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
    &["backend"],
    &["memory", "artifact", "state_keys", "pairing"],
    &["call"],
    &["store"],
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

/// The code of a file with its comments left out (`//` comments, doc comments included: their
/// links name modules without using them) and its unit tests too: everything from a
/// `#[cfg(test)]` followed by `mod tests` on, and all of a `tests.rs`. Unit tests may use any
/// room (a registry test may start a runtime); the floors bind what ships. Lines keep their
/// numbers.
fn code_of(text: &str, path: &Path) -> String {
    if path.file_name().is_some_and(|name| name == "tests.rs") {
        return String::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let tests_start = lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]" && pair[1].trim().starts_with("mod tests")
        })
        .unwrap_or(lines.len());
    lines[..tests_start]
        .iter()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The line (from 1) of byte `at` in `code`.
fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// The names that follow `prefix` in `code`, with where each is: `crate::a::b` gives `a` for
/// the prefix `crate::`, and a group `crate::{a::X, b}` (on one line or several) gives `a` and
/// `b`.
fn names_after(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let is_name = |c: char| c.is_alphanumeric() || c == '_';
    let first_name = |text: &str| -> String {
        let text = text.trim_start();
        text[..text.find(|c: char| !is_name(c)).unwrap_or(text.len())].to_owned()
    };
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find(prefix) {
        let at = from + found;
        from = at + prefix.len();
        if code[..at].chars().next_back().is_some_and(is_name) {
            continue; // `foocrate::` is not a path of this crate
        }
        let rest = &code[from..];
        if !rest.starts_with('{') {
            names.push((at, first_name(rest)));
            continue;
        }
        // A group: its items at the outer level, each named by its first segment.
        let mut depth = 0;
        let mut item_start = 1;
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    let name = first_name(&rest[item_start..i]);
                    if !name.is_empty() && name != "self" {
                        names.push((at, name));
                    }
                    item_start = i + 1;
                    if c == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
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
        let code = code_of(&text, path);
        for (at, used) in names_after(&code, "crate::") {
            if used == *module || used.is_empty() {
                continue;
            }
            match floor_of(&used) {
                Some(floor) if floor > own => {}
                _ => against
                    .entry(format!("{module} -> {used}"))
                    .or_default()
                    .push(format!("{}:{}", path.display(), line_of(&code, at))),
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
        let code = code_of(&text, path);
        let depth = relative.components().count();
        // A sibling is `super::x` from a file directly under src/http, and `super::super::x`
        // one folder further down; `crate::http::x` from anywhere.
        let mut used = names_after(&code, "crate::http::");
        if depth == 1 {
            used.extend(names_after(&code, "super::"));
        } else if depth == 2 {
            used.extend(names_after(&code, "super::super::"));
        }
        for (at, name) in used {
            let handler = HANDLERS.contains(&name.as_str()) && !may_use_handlers;
            if (handler || name == "openapi") && name != own {
                let line = line_of(&code, at);
                found.push(format!("{}:{line} uses `{name}`", path.display()));
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
    let names = |code: &str| -> Vec<String> {
        names_after(code, "crate::")
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    };
    assert_eq!(names("use crate::store::Store;"), ["store"]);
    assert_eq!(names("let x = foocrate::a;"), Vec::<String>::new());
    assert_eq!(
        names("use crate::{\n    runtime::Runtime,\n    store::{InMemoryStore, Store},\n    self,\n};"),
        ["runtime", "store"]
    );
    let file = Path::new("src/x.rs");
    let code = code_of(
        "/// [x](crate::http)\nuse crate::key; // crate::http\n#[cfg(test)]\nmod tests {\n    use crate::http;\n}\n",
        file,
    );
    let found = names_after(&code, "crate::");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (line_of(&code, found[0].0), found[0].1.as_str()),
        (2, "key")
    );
    assert!(code_of("use crate::http;", Path::new("src/x/tests.rs")).is_empty());
    assert!(floor_of("store").unwrap() > floor_of("session").unwrap());
    assert!(floor_of("http").unwrap() < floor_of("channel").unwrap());
}
