//! The crate's rooms stack in one direction (`docs/architecture.md`): a module uses only the
//! modules below it, never one above or beside it. This test reads every `crate::` path in the
//! library's code (comments left out) and names each one that runs against that direction, so a
//! back-edge fails here rather than in a review.
//!
//! The same for the HTTP gateway's insides: a route handler is used only by the router
//! (`src/http.rs`) and the OpenAPI document; handlers share only the gateway's bottom modules.
//!
//! And the gateway is built on the library's public API only, as an embedding application would
//! be: every library item its code names is public — a public module's `pub` item, or one the
//! crate root re-exports — and none is a store's (`docs/architecture.md`: the library decides,
//! adapters format).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Floors, top first. A module may use modules on lower floors only (and itself).
const FLOORS: &[&[&str]] = &[
    &["fuzzing"],
    &["http"],
    &["channel", "responses"],
    &["runtime"],
    &["registry"],
    &["session"],
    &["stream"],
    &["error"],
    &["agent"],
    &["context"],
    &["config"],
    &["backend"],
    &["memory", "artifact", "state_keys", "pairing", "inbox"],
    &["channel_message"],
    &["call"],
    &["store"],
    &["state"],
    &["key", "stats", "atomic_file", "parse"],
    &["hex"],
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
/// links name modules without using them; a `//` inside a string literal is no comment) and its
/// unit tests too: everything of an inline `#[cfg(test)] mod tests { … }` (or a `#[cfg(…)]`
/// naming `test`) on, and all of a
/// `tests.rs`. Unit tests may use any room (a registry test may start a runtime); the floors
/// bind what ships. A `#[cfg(test)] mod tests;` (its code in a file of its own) hides nothing
/// after it. Lines keep their numbers.
fn code_of(text: &str, path: &Path) -> String {
    if path.file_name().is_some_and(|name| name == "tests.rs") {
        return String::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let tests_start = lines
        .windows(2)
        .position(|pair| {
            let (cfg, next) = (pair[0].trim(), pair[1].trim());
            let testing = cfg.starts_with("#[cfg(") && cfg.contains("test");
            testing && next.starts_with("mod tests") && !next.ends_with(';')
        })
        .unwrap_or(lines.len());
    lines[..tests_start]
        .iter()
        .map(|line| without_comment(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A line without its `//` comment, if it has one: string and character literals are read
/// through, so that `"http://…"` is not taken for one.
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            // A character literal ('"', '\'', 'x'), not a lifetime ('a).
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if bytes.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    line
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
        if rest.trim_start().starts_with('*') {
            names.push((at, "*".to_owned()));
            continue;
        }
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
                    let item = rest[item_start..i].trim();
                    let name = match item.starts_with('*') {
                        true => "*".to_owned(),
                        false => first_name(item),
                    };
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

/// The names the crate root re-exports (`pub use module::{A, B}` in `lib.rs`), each with the
/// module it comes from.
fn root_exports(src: &Path) -> BTreeMap<String, String> {
    let lib = fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let code = code_of(&lib, &src.join("lib.rs"));
    let mut exports = BTreeMap::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("pub use ") {
        let start = from + found + "pub use ".len();
        let end = start + code[start..].find(';').expect("a `pub use` ends");
        from = end;
        let statement: String = code[start..end].split_whitespace().collect();
        let (module, rest) = statement.split_once("::").expect("`pub use module::…`");
        let names = rest.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',').filter(|n| !n.is_empty()) {
            let name = name.rsplit("::").next().expect("a name");
            let name = name.rsplit(" as ").next().unwrap_or(name);
            exports.insert(name.to_owned(), module.to_owned());
        }
    }
    exports
}

/// The crate-root names `code` uses, with where: after `crate::`, and after the `super::` chain
/// that reaches the root from `path` (`super::` in a top-level file, `super::super::` one
/// folder down). A glob is `*`.
fn root_names(code: &str, path: &Path, src: &Path) -> Vec<(usize, String)> {
    let mut names = names_after(code, "crate::");
    let depth = path.strip_prefix(src).map_or(0, |p| p.components().count());
    if depth > 0 {
        let chain = "super::".repeat(depth);
        names.extend(names_after(code, &chain).into_iter().filter(|(at, _)| {
            // Not part of a longer chain, which reaches past the root.
            !code[..*at].ends_with("super::")
        }));
    }
    names
}

/// The module a root name belongs to: itself when it is a module, else the module it is
/// re-exported from.
fn module_of<'a>(name: &'a str, exports: &'a BTreeMap<String, String>) -> &'a str {
    match exports.get(name) {
        Some(module) if floor_of(name).is_none() => module,
        _ => name,
    }
}

#[test]
fn every_module_uses_only_the_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let exports = root_exports(&src);
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
        for (at, used) in root_names(&code, path, &src) {
            let used = module_of(&used, &exports);
            if used == module || used.is_empty() {
                continue;
            }
            match floor_of(used) {
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

/// Store types the gateway may not name: it reads sessions through the runtime, never a store.
/// (`Page`, `PageRequest`, `SessionMeta` and `Owner` are defined beside the store trait but are
/// the runtime's answers — a listing, a session's placement — and the root exports them as such.)
const STORE_TYPES: &[&str] = &["Store", "StoreError", "InMemoryStore", "MemoryStore"];

/// The public modules of the crate (`pub mod` in `lib.rs`).
fn public_modules(src: &Path) -> Vec<String> {
    let lib = fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    lib.lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';').to_owned())
        .collect()
}

/// Whether `name` is declared plainly `pub` (not `pub(crate)`) in `module`'s files: an item, a
/// submodule, or a name in a `pub use`.
fn declared_pub(src: &Path, module: &str, name: &str) -> bool {
    let mut files = vec![src.join(format!("{module}.rs"))];
    let folder = src.join(module);
    if folder.is_dir() {
        rust_files(&folder, &mut files);
    }
    let kinds = [
        "fn", "async fn", "struct", "enum", "trait", "type", "const", "static", "mod",
    ];
    files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .any(|text| {
            let code = code_of(&text, Path::new("x.rs"));
            let item = kinds.iter().any(|kind| {
                code.match_indices(&format!("pub {kind} {name}"))
                    .any(|(at, found)| {
                        let after = code[at + found.len()..].chars().next();
                        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
            });
            let reexport = code.split("pub use ").skip(1).any(|rest| {
                let statement = &rest[..rest.find(';').unwrap_or(rest.len())];
                statement
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| word == name)
            });
            item || reexport
        })
}

/// What `code` (a gateway file) names of the library that is not public or is a store's.
fn non_public_uses(code: &str, path: &Path, src: &Path) -> Vec<String> {
    let exports = root_exports(src);
    let public = public_modules(src);
    let mut found = Vec::new();
    let mut uses = root_names(code, path, src);
    // Each item named under a public module: `crate::key::{validate_id, KeyPart}`.
    for module in &public {
        for (at, item) in names_after(code, &format!("crate::{module}::")) {
            uses.push((at, format!("{module}::{item}")));
        }
    }
    for (at, used) in uses {
        let line = line_of(code, at);
        let why = match used.split_once("::") {
            Some(("http", _)) => None,
            Some(("store", _)) => Some("a store module item".to_owned()),
            Some((module, "*")) => Some(format!("a glob of {module}, which hides what it uses")),
            Some((module, item)) if !declared_pub(src, module, item) => {
                Some(format!("`{module}::{item}` is not public"))
            }
            Some(_) => None,
            None if used == "*" => Some("a glob of the crate root".to_owned()),
            None if used == "http" || used.is_empty() => None,
            None if STORE_TYPES.contains(&used.as_str()) => Some(format!("`{used}` is a store's")),
            None if public.contains(&used) || exports.contains_key(&used) => None,
            None => Some(format!("`{used}` is a private module")),
        };
        if let Some(why) = why {
            found.push(format!("{}:{line}: {why}", path.display()));
        }
    }
    found
}

#[test]
fn the_gateway_uses_only_public_library_items_and_no_store() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("http"), &mut files);
    files.push(src.join("http.rs"));
    let mut found = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).expect("readable source");
        found.extend(non_public_uses(&code_of(&text, path), path, &src));
    }
    assert!(
        found.is_empty(),
        "the gateway uses the library as an embedding application would (public items only, no \
         store; docs/architecture.md):\n{}",
        found.join("\n")
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

/// Each form a check once missed is caught, planted in a file's code.
#[test]
fn the_checks_see_what_they_used_to_miss() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = |code: &str, file: &str| -> Vec<String> {
        let path = src.join(file);
        root_names(&code_of(code, &path), &path, &src)
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    };
    // A glob of the crate.
    assert_eq!(names("use crate::*;", "key.rs"), ["*"]);
    assert_eq!(names("use crate::{key, *};", "key.rs"), ["key", "*"]);
    // `super::` from a top-level file is the crate root; one folder down, `super::super::`.
    assert_eq!(names("use super::http::Gateway;", "state.rs"), ["http"]);
    assert_eq!(names("use super::super::http;", "state/event.rs"), ["http"]);
    assert_eq!(
        names("use super::event::Event;", "state/turn.rs"),
        Vec::<String>::new()
    );
    // Code after a `#[cfg(test)] mod tests;` whose tests live in a file of their own.
    let early = "#[cfg(test)]\nmod tests;\nuse crate::http;\n";
    assert_eq!(names(early, "key.rs"), ["http"]);
    // A path after a string holding `//` on the same line.
    let url = "let u = \"http://x\"; use_it(crate::http::Gateway::new);";
    assert_eq!(names(url, "key.rs"), ["http"]);
    assert_eq!(
        without_comment("let c = '\"'; crate::a // crate::b"),
        "let c = '\"'; crate::a "
    );
    // Each is a back-edge to the floors' check: `http` is above `key` and `state`.
    assert!(floor_of("http").unwrap() < floor_of("state").unwrap());
    // The gateway's check refuses private modules, crate-private items, store types and globs.
    let http = src.join("http/x.rs");
    let refused = |code: &str| non_public_uses(&code_of(code, &http), &http, &src);
    assert!(refused("use crate::call::CallOptions;")[0].contains("private module"));
    assert!(
        refused("use crate::state::SessionRecord;").is_empty(),
        "public"
    );
    assert!(
        refused("use crate::CallOptions;").is_empty(),
        "re-exported at the root"
    );
    assert!(refused("use crate::agent::stored_reason;")[0].contains("not public"));
    assert!(refused("use crate::store::Page;")[0].contains("store"));
    assert!(refused("use crate::StoreError;")[0].contains("store"));
    assert!(refused("use crate::key::*;")[0].contains("glob"));
    assert!(refused("use super::super::error::Error;")[0].contains("private module"));
}
