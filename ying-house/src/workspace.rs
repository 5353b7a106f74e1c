//! The workspace: its members, read from its `Cargo.toml`, each member's `src/` checked against its table.

use std::path::Path;

use crate::check::{Breach, Rule, check};
use crate::table::Table;

/// The members of the workspace whose manifest is `manifest` (the text of its `Cargo.toml`): the strings of its
/// `members = [ … ]` array, as written (paths, no globs).
pub fn members(manifest: &str) -> Result<Vec<String>, String> {
    // The key at the start of a line: not `members` inside another key's name or value.
    let start = manifest
        .match_indices("members")
        .map(|(at, _)| at)
        .find(|&at| {
            let line_start = manifest[..at].rfind('\n').map_or(0, |newline| newline + 1);
            manifest[line_start..at].trim().is_empty() && manifest[at + "members".len()..].trim_start().starts_with('=')
        })
        .ok_or("no `members` in the workspace's manifest")?;
    let array = &manifest[start..];
    let open = array.find('[').ok_or("`members` is no array")?;
    let close = array.find(']').ok_or("`members` is not closed")?;
    let mut members = Vec::new();
    for line in array[open + 1..close].lines() {
        // A comment runs to the end of its line; a member's path has no `#`.
        let line = line.split('#').next().unwrap_or_default();
        members.extend(line.split('"').skip(1).step_by(2).map(str::to_owned));
    }
    Ok(members)
}

/// The `.rs` files under `src` (a crate's `src/`): each its path under `src/`, with `/` between folders, and its
/// text, in the order of their paths.
pub fn read_src(src: &Path) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|error| format!("reading {}: {error}", folder.display()))?;
        for entry in entries {
            let path = entry.map_err(|error| format!("reading {}: {error}", folder.display()))?.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let text =
                    std::fs::read_to_string(&path).map_err(|error| format!("reading {}: {error}", path.display()))?;
                let relative = path.strip_prefix(src).map_err(|error| format!("{}: {error}", path.display()))?;
                let parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
                files.push((parts.join("/"), text));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The breaches of the workspace at `root` (the folder of its `Cargo.toml`): each member's `src/` checked against
/// its table in `tables`; a member without a table, and a table of no member, are breaches too.
pub fn check_workspace(root: &Path, tables: &[Table]) -> Result<Vec<Breach>, String> {
    let manifest = root.join("Cargo.toml");
    let manifest =
        std::fs::read_to_string(&manifest).map_err(|error| format!("reading {}: {error}", manifest.display()))?;
    let members = members(&manifest)?;
    let mut breaches = Vec::new();
    for member in &members {
        let Some(table) = tables.iter().find(|table| table.member == member.as_str()) else {
            breaches.push(Breach {
                rule: Rule::Table,
                sites: vec![member.clone()],
                message: format!(
                    "{member}: a member of the workspace with no table; add one to ying-house/src/floors.rs (its \
                     floors, lowest first, each with a line of why) and name it in `TABLES`"
                ),
            });
            continue;
        };
        let files = read_src(&root.join(member).join("src"))?;
        breaches.extend(check(table, &files));
    }
    for table in tables.iter().filter(|table| !members.iter().any(|member| member == table.member)) {
        breaches.push(Breach {
            rule: Rule::Table,
            sites: vec![table.member.to_owned()],
            message: format!(
                "{}: a table of no member of the workspace; remove it from ying-house/src/floors.rs",
                table.member
            ),
        });
    }
    Ok(breaches)
}

#[cfg(test)]
mod tests {
    use super::{check_workspace, members};
    use crate::check::Rule;
    use crate::table::{Floor, Table};

    #[test]
    fn the_members_are_read_from_the_manifest() {
        let manifest = "[workspace]\nresolver = \"3\"\nmembers = [\"a\", \"b\", # the binaries\n  \"tools/c\",\n]\n\
                        exclude = [\"fixtures\"]\n";
        assert_eq!(members(manifest).unwrap(), ["a", "b", "tools/c"]);
        assert_eq!(members("[workspace]\n").unwrap_err(), "no `members` in the workspace's manifest");
    }

    #[test]
    fn a_member_without_a_table_and_a_table_without_a_member_are_refused() {
        let root = std::env::temp_dir().join(format!("ying-house-{}", std::process::id()));
        for (file, text) in [
            ("Cargo.toml", "[workspace]\nmembers = [\"a\", \"b\"]\n"),
            ("a/src/lib.rs", "mod low;\npub use low::X;\n"),
            ("a/src/low.rs", "pub struct X;\nfn f() -> crate::X { X }\n"),
            ("b/src/lib.rs", ""),
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("a temporary folder");
            std::fs::write(&path, text).expect("a temporary file");
        }
        let floors = &[Floor { modules: &["low"], why: "below" }, Floor { modules: &["lib"], why: "above" }];
        let tables = [
            Table { member: "a", floors, never: &[], apart: &[] },
            Table { member: "c", floors, never: &[], apart: &[] },
        ];
        let found = check_workspace(&root, &tables);
        std::fs::remove_dir_all(&root).expect("the temporary folder removed");
        let found = found.expect("the workspace is read");
        let rules: Vec<Rule> = found.iter().map(|breach| breach.rule).collect();
        assert_eq!(rules, [Rule::Circle, Rule::Table, Rule::Table], "{found:#?}");
        assert_eq!(
            found[1].to_string(),
            "b: a member of the workspace with no table; add one to ying-house/src/floors.rs (its floors, lowest \
             first, each with a line of why) and name it in `TABLES`"
        );
        assert_eq!(
            found[2].to_string(),
            "c: a table of no member of the workspace; remove it from ying-house/src/floors.rs"
        );
    }
}
