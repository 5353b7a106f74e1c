//! The runtime's layering, checked on its source: `base` < `hot` < `read` < `products`, each layer using only the
//! layers below it, and the crate root (`lib.rs`) above them all. Inside a layer, a path names the module it comes
//! from (`crate::hot::scope::Scope`), never one of the root's re-exports (`crate::Scope`, `crate::report`): those
//! are the paths of the crate's users, and an import through them is an arrow running back up.
//!
//! Every path from the crate root in code is read (`crate::…`, and `super::…` where it climbs to the root), in `use`
//! lines and inline, each branch of a group (`crate::{hot::stacks, read::symbolize}`) on its own; comments and
//! string literals are not code. A file's test module (`#[cfg(test)] mod tests { … }`) may use any layer: it
//! checks what its layer did with the layers above, and is no part of the runtime's build.

use std::fmt;
use std::path::Path;

/// The layers, lowest first.
const LAYERS: [&str; 4] = ["base", "hot", "read", "products"];

/// The rule of the layers' order.
const UPWARD: &str = "a layer uses only the layers below it (base < hot < read < products)";

/// The rule of the root's re-exports.
const THROUGH_ROOT: &str = "inside a layer, a path names the module it comes from (crate::base, crate::hot, \
     crate::read, crate::products), not one of the crate root's re-exports";

/// A path that breaks a rule: where it is, what it names and the rule.
#[derive(Debug)]
struct Violation {
    file: String,
    line: usize,
    path: String,
    rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "src/{}:{}: `{}`: {}", self.file, self.line, self.path, self.rule)
    }
}

/// The layer of the file at `file` (relative to `src/`, with `/` between folders): its index in [`LAYERS`]; `None`
/// for a file of the crate root; `Err` with its folder when that is no layer.
fn layer_of(file: &str) -> Result<Option<usize>, &str> {
    let Some((folder, _)) = file.split_once('/') else { return Ok(None) };
    LAYERS.iter().position(|&layer| layer == folder).map(Some).ok_or(folder)
}

/// The paths of `source` (the text of the file at `file`, relative to `src/`) that break a rule.
fn violations(file: &str, source: &str) -> Vec<Violation> {
    let layer = match layer_of(file) {
        Ok(Some(layer)) => layer,
        Ok(None) => return Vec::new(),
        Err(folder) => {
            let rule = format!("every file lies in a layer ({}) or is the crate root's", LAYERS.join(", "));
            return vec![Violation { file: file.to_owned(), line: 1, path: format!("{folder}/"), rule }];
        }
    };
    let code = without_comments_and_strings(source);
    let tests = test_modules(&code);
    let mut found = Vec::new();
    for (at, first) in root_paths(file, &code) {
        if tests.iter().any(|range| range.contains(&at)) {
            continue;
        }
        let rule = match LAYERS.iter().position(|&name| name == first) {
            Some(used) if used <= layer => continue,
            Some(used) => format!("{UPWARD}: {} may not use {}", LAYERS[layer], LAYERS[used]),
            None => THROUGH_ROOT.to_owned(),
        };
        let line = code[..at].matches('\n').count() + 1;
        found.push(Violation { file: file.to_owned(), line, path: format!("crate::{first}"), rule });
    }
    found
}

/// `source` with its comments, string literals and character literals blanked out (lines kept where they were).
fn without_comments_and_strings(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut code = bytes.to_vec();
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut code[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        // A raw string starts after a word boundary, or after the `b` of a raw byte string.
        let raw_may_start = match at.checked_sub(1).map(|before| bytes[before]) {
            Some(b'b') => at < 2 || !is_word_byte(bytes[at - 2]),
            Some(before) => !is_word_byte(before),
            None => true,
        };
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|&byte| byte == b'\n').map_or(bytes.len(), |len| at + len)
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut end = at;
            while end < bytes.len() {
                if bytes[end..].starts_with(b"/*") {
                    depth += 1;
                    end += 2;
                } else if bytes[end..].starts_with(b"*/") {
                    depth -= 1;
                    end += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    end += 1;
                }
            }
            end
        } else if rest[0] == b'"' {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            end + 1
        } else if raw_may_start && (rest.starts_with(b"r#") || rest.starts_with(b"r\"")) {
            let hashes = rest[1..].iter().take_while(|&&byte| byte == b'#').count();
            let closing = [b"\"".as_slice(), &vec![b'#'; hashes]].concat();
            let body = at + 2 + hashes;
            match bytes[body..].windows(closing.len()).position(|window| window == closing) {
                Some(len) => body + len + closing.len(),
                None => bytes.len(),
            }
        } else if rest[0] == b'\'' && rest.get(1) == Some(&b'\\') {
            let len = rest[2..].iter().position(|&byte| byte == b'\'').map_or(rest.len(), |len| len + 3);
            at + len
        } else if let Some(len) = char_literal_len(&source[at..]) {
            at + len
        } else {
            at += 1;
            continue;
        };
        let end = end.min(bytes.len());
        blank(&mut code, at, end);
        at = end;
    }
    String::from_utf8(code).expect("only ASCII bytes were written over")
}

/// Whether `byte` may be part of a word (an identifier or a keyword).
fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The length of the character literal without escape (`'x'`) that `text` starts with, if it starts with one (and
/// not with a lifetime).
fn char_literal_len(text: &str) -> Option<usize> {
    let inner = text.strip_prefix('\'')?.chars().next()?;
    text[1 + inner.len_utf8()..].starts_with('\'').then_some(inner.len_utf8() + 2)
}

/// The byte ranges of `code`'s test modules: a module item (`mod name { … }`) under an attribute `#[cfg(…)]` that
/// names `test` (and not `not`).
fn test_modules(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut modules = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(") {
        let start = from + found;
        let Some(close) = code[start..].find(']') else { break };
        let attribute = &code[start..start + close];
        from = start + close + 1;
        if !words(attribute).any(|word| word == "test") || words(attribute).any(|word| word == "not") {
            continue;
        }
        // The item under the attribute: a module with a body, after any other attributes and its visibility.
        let item = code[from..].trim_start();
        let item_start = code.len() - item.len();
        let Some(brace) = item.find(['{', ';']) else { continue };
        let head: Vec<&str> = words(&item[..brace]).collect();
        if item.as_bytes()[brace] != b'{' || !head.contains(&"mod") {
            continue;
        }
        let end = block_end(code, item_start + brace);
        modules.push(start..end);
        from = end;
    }
    modules
}

/// Where the block that opens at `open` (a `{` of `code`) ends: just past its matching `}`, or at the end of `code`.
fn block_end(code: &str, open: usize) -> usize {
    let mut depth = 0;
    let close = code[open..].char_indices().find_map(|(offset, c)| {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(open + offset)
    });
    close.map_or(code.len(), |close| close + 1)
}

/// The words (identifiers and keywords) of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|word| !word.is_empty())
}

/// Each path of `code` (the code of the file at `file`) that starts at the crate root: where it starts and its
/// first name after the root. `crate::{a::x, b::y}` gives `a` and `b`; `super::…` counts where it climbs to the
/// root from the file's module (and from the inline modules it is in).
fn root_paths(file: &str, code: &str) -> Vec<(usize, String)> {
    let depth = file.trim_end_matches(".rs").split('/').filter(|&part| part != "mod").count();
    let inline = inline_modules(code);
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut at = 0;
    while at < code.len() {
        if !code.is_char_boundary(at) {
            at += 1;
            continue;
        }
        let rest = &code[at..];
        let starts_path = (rest.starts_with("crate::") || rest.starts_with("super::"))
            && (at == 0 || !is_word_byte(bytes[at - 1]))
            && !code[..at].trim_end().ends_with("::");
        let after_root = if starts_path && rest.starts_with("crate::") {
            Some(at + "crate::".len())
        } else if starts_path {
            let climbs = rest.split("::").take_while(|part| part.trim() == "super").count();
            let module_depth = depth + inline.iter().filter(|range| range.contains(&at)).count();
            let after = at + rest.split("::").take(climbs).map(|part| part.len() + 2).sum::<usize>();
            (climbs >= module_depth).then_some(after)
        } else {
            None
        };
        let Some(after_root) = after_root else {
            at += 1;
            continue;
        };
        let names = code[after_root..].trim_start();
        let names_at = code.len() - names.len();
        if let Some(group) = names.strip_prefix('{') {
            let mut depth = 0;
            let mut branch_start = true;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => branch_start = true,
                    c if branch_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        branch_start = false;
                        let name = words(&group[offset..]).next().unwrap_or_default();
                        paths.push((names_at + 1 + offset, name.to_owned()));
                    }
                    _ => {}
                }
            }
        } else if let Some(name) = words(names).next().filter(|_| names.starts_with(|c: char| c.is_alphanumeric())) {
            paths.push((at, name.to_owned()));
        }
        at = after_root;
    }
    paths
}

/// The byte ranges of the bodies of `code`'s inline modules (`mod name { … }`).
fn inline_modules(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut modules = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("mod ") {
        if at > 0 && is_word_byte(bytes[at - 1]) {
            continue;
        }
        let rest = &code[at + 4..];
        let name = rest.trim_start();
        let after_name = name.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if !after_name.trim_start().starts_with('{') {
            continue;
        }
        let open = code.len() - after_name.trim_start().len();
        modules.push(open..block_end(code, open));
    }
    modules
}

/// Every `.rs` file under `dir`, relative to `root`, with `/` between folders.
fn rust_files(root: &Path, dir: &Path, files: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            let parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
            files.push(parts.join("/"));
        }
    }
}

#[test]
fn no_file_uses_a_higher_layer_or_the_roots_re_exports() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    for expected in ["lib.rs", "base/mod.rs", "hot/mod.rs", "read/mod.rs", "products/mod.rs"] {
        assert!(files.iter().any(|file| file == expected), "src/{expected} not found among {files:?}");
    }
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(src.join(file)).unwrap_or_else(|error| panic!("src/{file}: {error}"));
        found.extend(violations(file, &source));
    }
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(found.is_empty(), "the runtime's layering is broken:\n{}", list.join("\n"));
}

#[test]
fn a_path_up_a_layer_or_through_the_root_is_refused() {
    let source = "\
use crate::base::ids::ScopeId;
use crate::products::measure;
use crate::{
    hot::stacks,
    read::symbolize::{self, symbolize},
};
fn f() -> crate::Scope {
    crate::read::stack_stats::top(super::super::super::products::report::X, crate::hot::scope::attributed(t));
    // crate::products in a comment, /* crate::report */ and \"crate::report\" in a string are not code
    let _ = r#\"crate::report\"#;
    let _ = ('\"', '\\'', '─', b'{');
}
mod inner {
    use super::super::super::super::products::spans;
    use super::super::super::scope::parts;
}
#[cfg(test)]
mod tests {
    use crate::products::measure;
}
";
    let found = violations("hot/scope/example.rs", source);
    let where_what: Vec<(usize, &str)> = found.iter().map(|found| (found.line, found.path.as_str())).collect();
    assert_eq!(
        where_what,
        [
            (2, "crate::products"),
            (5, "crate::read"),
            (7, "crate::Scope"),
            (8, "crate::read"),
            (8, "crate::products"),
            (14, "crate::products"),
        ],
        "{found:#?}"
    );
    assert_eq!(
        found[0].to_string(),
        format!("src/hot/scope/example.rs:2: `crate::products`: {UPWARD}: hot may not use products")
    );
    assert_eq!(found[2].to_string(), format!("src/hot/scope/example.rs:7: `crate::Scope`: {THROUGH_ROOT}"));
    // The same paths from the top layer break no rule but the one of the re-exports.
    let from_products = violations("products/example/deeper.rs", source);
    let rules: Vec<&str> = from_products.iter().map(|found| found.rule.as_str()).collect();
    assert_eq!(rules, [THROUGH_ROOT]);
    // The crate root may use anything; a folder that is no layer is refused.
    assert!(violations("lib.rs", source).is_empty());
    let stray = violations("extra/file.rs", "");
    assert_eq!(stray.len(), 1);
    assert_eq!(
        stray[0].to_string(),
        "src/extra/file.rs:1: `extra/`: every file lies in a layer (base, hot, read, products) or is the crate root's"
    );
}
