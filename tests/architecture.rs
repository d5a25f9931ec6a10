//! The layers of the library, read from its own source: which top-level module (a "room":
//! `src/X.rs` with `src/X/`) names which through `crate::` paths — `use crate::...` lines and
//! paths written inline — outside test code. docs/architecture.md "Layers" draws the result.
//!
//! Asserted, from the ground up:
//! - `domain` names nothing of the crate but itself;
//! - `store` names only `domain`;
//! - `config`, `error` and `state` name no feature module ([`FEATURES`]);
//! - `oauth` never names `web`;
//! - nothing in the library names `cli` (only the binary, `src/main.rs`, does);
//! - no circle between rooms: the rooms can be stacked so that every arrow points down.
//!
//! Test code (`#[cfg(test)]` modules, inline or in files of their own) may reach across the
//! layers and is not read.

// Test code states its expectations with `expect`: a failed one is the test failing.
#![allow(clippy::expect_used, clippy::needless_pass_by_value)]
// A test reads as one story from setup to the last assertion; the 100-line bound is for the
// library.
#![allow(clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules that serve a protocol or a person (routes, pages, commands), above the shared
/// ground (`domain`, `store`, `config`, `error`, `state`, `metrics`, ...).
const FEATURES: &[&str] = &[
    "app", "cli", "doctor", "mcp", "oauth", "remote", "signin", "upkeep", "web",
];

/// One `crate::` path found in library code.
#[derive(Debug, Clone)]
struct Arrow {
    from: String,
    to: String,
    at: String,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The room of `path` (`src/store/oauth.rs` → `store`, `src/config.rs` → `config`).
fn room(path: &Path) -> String {
    let relative = path.strip_prefix(src()).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_string_lossy().trim_end_matches(".rs").to_string()
}

/// The file a `mod name;` declared in `file` refers to.
fn module_file(file: &Path, name: &str) -> PathBuf {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let dir = file.parent().unwrap();
    let base = if stem == "mod" || stem == "lib" || stem == "main" {
        dir.to_path_buf()
    } else {
        dir.join(&*stem)
    };
    let flat = base.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        base.join(name).join("mod.rs")
    }
}

/// The lines of `text` that are library code: without `#[cfg(test)]` items (an inline module
/// is skipped to its closing brace), without comments. Also the files of `#[cfg(test)] mod x;`.
fn library_lines(
    file: &Path,
    text: &str,
    test_files: &mut BTreeSet<PathBuf>,
) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line == "#[cfg(test)]" {
            // The item it guards, past further attributes.
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            let item = lines.get(j).map_or("", |l| l.trim());
            let declared = item
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'));
            if let Some(name) = declared {
                test_files.insert(module_file(file, name));
                i = j + 1;
                continue;
            }
            // Skip the item to where its braces close (or its `;`).
            let mut depth = 0i32;
            let mut opened = false;
            while j < lines.len() {
                for c in lines[j].chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth <= 0) || (!opened && lines[j].trim_end().ends_with(';')) {
                    break;
                }
                j += 1;
            }
            i = j + 1;
            continue;
        }
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push((i + 1, code.to_string()));
        i += 1;
    }
    out
}

/// The rooms named by `crate::` paths in `code` (`crate::a::b`, `crate::{a, b::c}`).
fn named_rooms(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::`, not this crate
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            for part in inner.split(',') {
                let name = part.trim().split("::").next().unwrap_or_default().trim();
                if !name.is_empty() {
                    out.push(name.to_string());
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// Every arrow between two rooms of the library.
fn arrows() -> Vec<Arrow> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut test_files = BTreeSet::new();
    let mut read = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        read.push((file.clone(), library_lines(file, &text, &mut test_files)));
    }
    let mut arrows = Vec::new();
    for (file, lines) in read {
        let from = room(&file);
        // The binary and the crate root are not rooms; test files are not library code.
        if from == "main" || from == "lib" || test_files.contains(&file) {
            continue;
        }
        for (number, code) in lines {
            for to in named_rooms(&code) {
                if to != from {
                    arrows.push(Arrow {
                        from: from.clone(),
                        to,
                        at: format!(
                            "{}:{number}",
                            file.strip_prefix(src().parent().unwrap())
                                .unwrap()
                                .display()
                        ),
                    });
                }
            }
        }
    }
    arrows
}

fn broken(arrows: &[Arrow], rule: impl Fn(&Arrow) -> bool) -> Vec<String> {
    arrows
        .iter()
        .filter(|a| rule(a))
        .map(|a| format!("{} -> {} ({})", a.from, a.to, a.at))
        .collect()
}

#[test]
fn domain_names_nothing_of_the_crate() {
    let wrong = broken(&arrows(), |a| a.from == "domain");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn store_names_only_domain() {
    let wrong = broken(&arrows(), |a| a.from == "store" && a.to != "domain");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn config_error_and_state_name_no_feature() {
    let wrong = broken(&arrows(), |a| {
        ["config", "error", "state"].contains(&a.from.as_str()) && FEATURES.contains(&a.to.as_str())
    });
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn oauth_never_names_web() {
    let wrong = broken(&arrows(), |a| a.from == "oauth" && a.to == "web");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn nothing_in_the_library_names_cli() {
    let wrong = broken(&arrows(), |a| a.to == "cli");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The rooms in a circle, if any: what remains after taking away, again and again, every
/// room that names no room still left.
fn circle(arrows: &[Arrow]) -> BTreeMap<String, BTreeSet<String>> {
    let mut left: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in arrows {
        left.entry(a.from.clone()).or_default().insert(a.to.clone());
        left.entry(a.to.clone()).or_default();
    }
    loop {
        let ground: Vec<String> = left
            .iter()
            .filter(|(_, to)| to.iter().all(|t| !left.contains_key(t)))
            .map(|(room, _)| room.clone())
            .collect();
        if ground.is_empty() {
            break;
        }
        for room in ground {
            left.remove(&room);
        }
    }
    let rooms: BTreeSet<String> = left.keys().cloned().collect();
    for to in left.values_mut() {
        to.retain(|t| rooms.contains(t));
    }
    left
}

#[test]
fn no_circle_between_rooms() {
    let arrows = arrows();
    let left = circle(&arrows);
    let ties: Vec<String> = arrows
        .iter()
        .filter(|a| left.contains_key(&a.from) && left.contains_key(&a.to))
        .map(|a| format!("{} -> {} ({})", a.from, a.to, a.at))
        .collect();
    assert!(
        left.is_empty(),
        "rooms in a circle: {left:#?}\nthrough:\n{}",
        ties.join("\n")
    );
}

#[test]
fn the_reading_finds_the_arrows_it_must() {
    // The reading itself: it must see the arrows every layer is built on, or the rules above
    // would hold of nothing.
    let arrows = arrows();
    for (from, to) in [
        ("store", "domain"),
        ("state", "store"),
        ("oauth", "store"),
        ("app", "web"),
    ] {
        assert!(
            arrows.iter().any(|a| a.from == from && a.to == to),
            "no {from} -> {to} found"
        );
    }
    assert_eq!(
        named_rooms(
            "use crate::{config::Config, store::Store}; let x = my_crate::y; crate::web::f()"
        ),
        ["config", "store", "web"]
    );
    // A circle is found, and only where there is one.
    let arrow = |from: &str, to: &str| Arrow {
        from: from.into(),
        to: to.into(),
        at: String::new(),
    };
    let looped = circle(&[
        arrow("a", "b"),
        arrow("b", "c"),
        arrow("c", "a"),
        arrow("c", "d"),
    ]);
    assert_eq!(looped.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert!(circle(&[arrow("a", "b"), arrow("b", "c"), arrow("a", "c")]).is_empty());
    // Test code is not read: domain's property tests name oauth.
    assert!(!arrows.iter().any(|a| a.at.contains("domain/properties.rs")));
}
