//! How a crate's layering is written: its floors, lowest first, each a list of entries with a line of why, and the
//! rules of its own beside them.
//!
//! An entry names modules as [`File::name`](crate::modules::File::name) does: `"cli"` is one module, `"commands/"`
//! a folder (its `mod.rs` and every module under it), `"lib"` the crate root and `"bin/"` the binaries. When
//! several entries cover a module, the longest decides.
//!
//! ```
//! use ying_house::table::{Apart, Floor, Never, Table};
//!
//! const EXAMPLE: Table = Table {
//!     member: "example",
//!     floors: &[
//!         Floor { modules: &["error", "config"], why: "the ground: what every module may name" },
//!         Floor { modules: &["run/"], why: "the pipeline" },
//!         Floor { modules: &["outputs/"], why: "what a run is shown as" },
//!         Floor { modules: &["commands/"], why: "one module per command" },
//!         Floor { modules: &["lib", "main"], why: "the crate root" },
//!     ],
//!     never: &[Never { from: "outputs/", to: &["run/runner"], why: "the outputs read the run, never run it" }],
//!     apart: &[Apart { folder: "commands/", why: "commands share code only through the modules below them" }],
//! };
//! assert_eq!(EXAMPLE.floor_of("run/runner"), Some((1, "run/")));
//! assert_eq!(EXAMPLE.floor_of("commands"), Some((3, "commands/")));
//! assert_eq!(EXAMPLE.floor_of("stray"), None);
//! ```

/// One crate's layering.
#[derive(Debug)]
pub struct Table {
    /// The crate, as the workspace's `members` names it (`cargo-ying`).
    pub member: &'static str,
    /// Its floors, lowest first: a file imports only files of its own floor and the floors below.
    pub floors: &'static [Floor],
    /// Imports refused whatever the floors allow.
    pub never: &'static [Never],
    /// Folders whose files never import one another.
    pub apart: &'static [Apart],
}

/// A floor: the modules that stand on it, and why they stand together.
#[derive(Debug)]
pub struct Floor {
    /// Its entries.
    pub modules: &'static [&'static str],
    /// A line of why.
    pub why: &'static str,
}

/// Imports refused: the modules `from` covers never import those `to` covers.
#[derive(Debug)]
pub struct Never {
    /// The importing modules' entry.
    pub from: &'static str,
    /// The entries of the modules they never import.
    pub to: &'static [&'static str],
    /// Why, as the breach says it.
    pub why: &'static str,
}

/// A folder whose files never import one another (its `mod.rs`, the folder's own face, aside).
#[derive(Debug)]
pub struct Apart {
    /// The folder's entry (`commands/`).
    pub folder: &'static str,
    /// Why, as the breach says it.
    pub why: &'static str,
}

impl Table {
    /// The floor of `module` (from 0, the lowest) and the entry that places it there: the longest entry that
    /// covers it; `None` if none does.
    pub fn floor_of(&self, module: &str) -> Option<(usize, &'static str)> {
        let entries =
            self.floors.iter().enumerate().flat_map(|(floor, on)| on.modules.iter().map(move |&entry| (floor, entry)));
        entries.filter(|&(_, entry)| covers(entry, module)).max_by_key(|&(_, entry)| entry.len())
    }
}

/// Whether the entry `entry` covers `module`: a folder's entry (`"commands/"`) covers the folder's `mod.rs`
/// (`commands`) and every module under it; any other entry (`"cli"`) the one module it names.
pub fn covers(entry: &str, module: &str) -> bool {
    match entry.strip_suffix('/') {
        Some(folder) => module == folder || module.strip_prefix(entry).is_some(),
        None => module == entry,
    }
}

#[cfg(test)]
mod tests {
    use super::{Floor, Table, covers};

    #[test]
    fn the_longest_entry_places_a_module() {
        assert!(covers("commands/", "commands"));
        assert!(covers("commands/", "commands/test"));
        assert!(!covers("commands/", "commandsx"));
        assert!(covers("cli", "cli"));
        assert!(!covers("cli", "cli/parse"));
        let table = Table {
            member: "example",
            floors: &[Floor { modules: &["run/process"], why: "low" }, Floor { modules: &["run/"], why: "high" }],
            never: &[],
            apart: &[],
        };
        assert_eq!(table.floor_of("run/process"), Some((0, "run/process")));
        assert_eq!(table.floor_of("run/runner"), Some((1, "run/")));
        assert_eq!(table.floor_of("run"), Some((1, "run/")));
        assert_eq!(table.floor_of("runner"), None);
    }
}
