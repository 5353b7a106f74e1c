//! Whether a library has doctests, so that a run names the doctests it leaves to rustdoc only where there are some.
//!
//! rustdoc runs each Rust code block of a doc comment as a test. Its sources are read for one: in `///` and `//!`
//! comments, `/** */` and `/*! */` blocks, and the Markdown files `#[doc = include_str!("...")]` brings in (a
//! README made the crate's documentation). A fenced block is Rust when its info string is empty or names no other
//! language, as rustdoc decides (`rust`, `ignore`, `no_run`, `should_panic`, `compile_fail`, `edition2021`, ... are
//! Rust's; `text`, `toml`, `sh`, ... are not). Indented code blocks are not looked for: they are rare in doc
//! comments, and a library with only those is told it has none.
//!
//! The sources are the `.rs` files under the directory of the library's root file, whether or not a `mod` reaches
//! them: a block found in a file that is not compiled names doctests that are not there, which costs a line; one
//! missed would hide tests.

use std::path::{Path, PathBuf};

/// At most this many files are read for a library: past it, it is taken to have doctests.
const MAX_FILES: usize = 10_000;

/// What rustdoc takes for a Rust block's attributes rather than a language (its `LangString`).
const RUST_ATTRIBUTES: &[&str] =
    &["rust", "ignore", "should_panic", "no_run", "compile_fail", "test_harness", "standalone_crate", "allow_fail"];

/// Whether the library whose root file is `root` has a doctest.
pub(crate) fn has_doctests(root: &Path) -> bool {
    let Some(dir) = root.parent() else { return true };
    let mut pending = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|extension| extension == "rs") {
                files += 1;
                if files > MAX_FILES || file_has_doctests(&path) {
                    return true;
                }
            }
        }
    }
    false
}

/// Whether the Rust file at `path` has a Rust code block in its doc comments, or includes Markdown that has one.
fn file_has_doctests(path: &Path) -> bool {
    let Ok(text) = ying_report::read_text(path) else { return false };
    let (docs, included) = doc_text(&text);
    has_rust_block(&docs)
        || included.iter().any(|file| {
            let file = path.parent().unwrap_or(Path::new(".")).join(file);
            ying_report::read_text(&file).is_ok_and(|markdown| has_rust_block(&markdown))
        })
}

/// The doc comments of a Rust source, a line of Markdown each, and the files its `doc` attributes include.
fn doc_text(source: &str) -> (String, Vec<PathBuf>) {
    let mut docs = String::new();
    let mut included = Vec::new();
    let mut in_block = false;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if in_block {
            let (text, ends) = match trimmed.split_once("*/") {
                Some((text, _)) => (text, true),
                None => (trimmed, false),
            };
            docs.push_str(text.trim_start_matches('*').trim_start());
            docs.push('\n');
            in_block = !ends;
            continue;
        }
        let comment = ["///", "//!"]
            .into_iter()
            .find_map(|marker| trimmed.strip_prefix(marker))
            .filter(|_| !trimmed.starts_with("////"));
        if let Some(text) = comment {
            docs.push_str(text.strip_prefix(' ').unwrap_or(text));
            docs.push('\n');
        } else if let Some(rest) = ["/**", "/*!"].into_iter().find_map(|marker| trimmed.strip_prefix(marker)) {
            match rest.split_once("*/") {
                Some((text, _)) => docs.push_str(text.trim()),
                None => {
                    docs.push_str(rest.trim());
                    in_block = true;
                }
            }
            docs.push('\n');
        } else if (trimmed.starts_with("#[doc") || trimmed.starts_with("#![doc"))
            && let Some((file, _)) = trimmed.split_once("include_str!(\"").and_then(|(_, rest)| rest.split_once('"'))
        {
            included.push(PathBuf::from(file));
        }
    }
    (docs, included)
}

/// Whether Markdown `text` has a fenced code block rustdoc would test.
fn has_rust_block(text: &str) -> bool {
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|marker| trimmed.starts_with(marker));
        match (fence, marker) {
            (None, Some(marker)) => {
                if is_rust(trimmed.trim_start_matches(marker.chars().next().unwrap_or('`'))) {
                    return true;
                }
                fence = Some(marker);
            }
            (Some(open), Some(marker)) if open == marker => fence = None,
            _ => {}
        }
    }
    false
}

/// Whether a fence's info string is Rust's, as rustdoc reads it: Rust when it names Rust, or names nothing else.
fn is_rust(info: &str) -> bool {
    let mut other = false;
    for token in info.split(|c: char| c == ',' || c.is_whitespace()).filter(|token| !token.is_empty()) {
        let token = token.trim_matches(|c| c == '{' || c == '}' || c == '.');
        if token.starts_with("edition") || RUST_ATTRIBUTES.contains(&token) {
            if token == "rust" {
                return true;
            }
        } else if !token.is_empty() {
            other = true;
        }
    }
    !other
}

#[cfg(test)]
mod tests {
    use super::{doc_text, has_doctests, has_rust_block, is_rust};

    #[test]
    fn a_block_is_rust_unless_it_names_another_language() {
        for info in ["", "rust", "ignore", "no_run", "should_panic", "rust,ignore", "compile_fail,edition2021"] {
            assert!(is_rust(info), "{info:?}");
        }
        for info in ["text", "toml", "sh", "console", "json,ignore", "{.text}"] {
            assert!(!is_rust(info), "{info:?}");
        }
        assert!(is_rust("rust,foo"), "naming Rust makes it Rust");
    }

    #[test]
    fn doc_comments_are_read_and_plain_comments_are_not() {
        let source = "//! Crate.\n//!\n//! ```\n//! assert!(true);\n//! ```\n// ```\n//// ```\n/// x\nfn f() {}\n";
        let (docs, included) = doc_text(source);
        assert_eq!(docs, "Crate.\n\n```\nassert!(true);\n```\nx\n");
        assert!(included.is_empty());
        assert!(has_rust_block(&docs));
        let plain = "// ```\n// let x = 1;\n// ```\n/// Text only.\n///\n/// ```text\n/// $ run\n/// ```\nfn g() {}\n";
        assert!(!has_rust_block(&doc_text(plain).0));
        let block = "/**\n * Example:\n * ```\n * f();\n * ```\n */\nfn h() {}\n";
        assert!(has_rust_block(&doc_text(block).0), "{:?}", doc_text(block).0);
        let readme = "#![doc = include_str!(\"../README.md\")]\n";
        assert_eq!(doc_text(readme).1, [std::path::PathBuf::from("../README.md")]);
    }

    #[test]
    fn a_library_with_a_rust_block_in_any_file_or_in_an_included_readme_has_doctests() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("deep")).unwrap();
        std::fs::write(src.join("lib.rs"), "//! A crate.\n//!\n//! ```text\n//! not rust\n//! ```\nmod deep;\n")
            .unwrap();
        std::fs::write(src.join("deep/mod.rs"), "/// Nothing to run.\npub fn f() {}\n").unwrap();
        assert!(!has_doctests(&src.join("lib.rs")));
        std::fs::write(src.join("deep/mod.rs"), "/// ```\n/// crate::deep::f();\n/// ```\npub fn f() {}\n").unwrap();
        assert!(has_doctests(&src.join("lib.rs")));
        std::fs::write(src.join("deep/mod.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(src.join("lib.rs"), "#![doc = include_str!(\"../README.md\")]\n").unwrap();
        std::fs::write(dir.path().join("README.md"), "# A crate\n\n```sh\ncargo add it\n```\n").unwrap();
        assert!(!has_doctests(&src.join("lib.rs")));
        std::fs::write(dir.path().join("README.md"), "# A crate\n\n```rust\nit::go();\n```\n").unwrap();
        assert!(has_doctests(&src.join("lib.rs")));
    }
}
