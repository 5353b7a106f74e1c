//! The files of a crate's `src/` as modules.
//!
//! `a/b.rs` is the module `a/b`, `a/mod.rs` the module `a`, and `lib.rs` the crate root (named `lib` in a table);
//! without a `lib.rs`, `main.rs` is the root (named `main`). Each `bin/*.rs`, and `main.rs` beside a `lib.rs`, is
//! the root of a binary crate of its own: its `crate::` paths are its own, and it has no modules here.

use std::collections::HashMap;

/// A file of a crate's `src/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Its path under `src/`, with `/` between folders (`run/mod.rs`).
    pub path: String,
    /// Its module as a table names it (`run`, `run/runner`, `lib`, `bin/dhat`).
    pub name: String,
    /// Where it sits in the crate's module tree: the names from the root (`["run", "runner"]`, `[]` for the root);
    /// `None` for the root of a binary crate of its own.
    pub segments: Option<Vec<String>>,
}

impl File {
    /// The file at `path` (under `src/`), in a crate that has a `lib.rs` or not.
    pub fn new(path: &str, has_lib: bool) -> Self {
        let stem = path.strip_suffix(".rs").unwrap_or(path);
        let own_binary = stem.starts_with("bin/") || (stem == "main" && has_lib);
        let name = stem.strip_suffix("/mod").unwrap_or(stem).to_owned();
        let segments = match stem {
            _ if own_binary => None,
            "lib" | "main" => Some(Vec::new()),
            _ => Some(name.split('/').map(str::to_owned).collect()),
        };
        Self { path: path.to_owned(), name, segments }
    }
}

/// A crate's files and its module tree.
#[derive(Debug)]
pub struct Modules {
    /// The files, in the order they were given.
    pub files: Vec<File>,
    /// The file of each module of the tree, by its segments.
    by_segments: HashMap<Vec<String>, usize>,
}

impl Modules {
    /// The modules of the files at `paths` (under `src/`, with `/` between folders).
    pub fn new<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        let paths: Vec<&str> = paths.into_iter().collect();
        let has_lib = paths.contains(&"lib.rs");
        let files: Vec<File> = paths.iter().map(|path| File::new(path, has_lib)).collect();
        let by_segments =
            files.iter().enumerate().filter_map(|(index, file)| Some((file.segments.clone()?, index))).collect();
        Self { files, by_segments }
    }

    /// The file of the module at `segments`, if one is.
    pub fn file(&self, segments: &[String]) -> Option<usize> {
        self.by_segments.get(segments).copied()
    }

    /// The deepest module file that the leading segments of `path` (from the crate root) name:
    /// `run/symbols` for `run::symbols::map_executable`, the root for `Frame`; `None` in a crate with no root.
    pub fn deepest(&self, path: &[String]) -> Option<usize> {
        (0..=path.len()).rev().find_map(|len| self.file(&path[..len]))
    }
}

#[cfg(test)]
mod tests {
    use super::Modules;

    #[test]
    fn files_name_their_modules() {
        let modules = Modules::new(["lib.rs", "main.rs", "run/mod.rs", "run/runner.rs", "bin/dhat.rs", "cli.rs"]);
        let named: Vec<(&str, Option<String>)> = modules
            .files
            .iter()
            .map(|file| (file.name.as_str(), file.segments.as_ref().map(|segments| segments.join("::"))))
            .collect();
        assert_eq!(
            named,
            [
                ("lib", Some(String::new())),
                ("main", None),
                ("run", Some("run".to_owned())),
                ("run/runner", Some("run::runner".to_owned())),
                ("bin/dhat", None),
                ("cli", Some("cli".to_owned())),
            ]
        );
        let path = |text: &str| text.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(modules.deepest(&path("run::runner::run")), Some(3));
        assert_eq!(modules.deepest(&path("run::plan::Plan")), Some(2));
        assert_eq!(modules.deepest(&path("Frame")), Some(0));
        // Without a lib.rs, main.rs is the root.
        let binary = Modules::new(["main.rs", "cli.rs"]);
        assert_eq!(binary.files[0].segments, Some(Vec::new()));
        assert_eq!(binary.deepest(&path("cli::Args")), Some(1));
    }
}
