//! A source file as the checker reads it: its code, with comments, string literals and character literals blanked
//! out and every line kept where it was; the string literals of its attributes, which serde reads as paths
//! (`#[serde(with = "crate::baseline::sites")]`); and where its inline modules and test modules are.
//!
//! A test module is a module item with a body under an attribute `#[cfg(…)]` that names `test` and not `not`
//! (`#[cfg(test)] mod tests { … }`, `#[cfg(all(test, unix))] pub(super) mod tests { … }`): the checker does not read
//! it, since a test may use anything.

use std::ops::Range;

/// A string literal of an attribute: where its text starts, its text, and the key it is the value of (`with` in
/// `#[serde(with = "sites")]`), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeString {
    /// The byte offset of the literal's text, just past its opening quote.
    pub at: usize,
    /// The literal's text, as written between its quotes.
    pub text: String,
    /// The word before the `=` the literal follows, if it follows one.
    pub key: Option<String>,
}

/// An inline module (`mod name { … }`): its name and the byte range of its body, braces included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineModule {
    /// The module's name.
    pub name: String,
    /// From its opening brace to just past its closing one.
    pub body: Range<usize>,
}

/// A source file, read: its code and the places the checker asks about.
#[derive(Debug)]
pub struct Source {
    /// The file's text with its comments and literals blanked (every byte but a line break made a space).
    pub code: String,
    /// The string literals written inside attributes (`#[…]`, `#![…]`).
    pub attribute_strings: Vec<AttributeString>,
    /// The inline modules, in the order they open.
    pub inline_modules: Vec<InlineModule>,
    /// The byte ranges of the test modules, from their `#[cfg(` to just past their closing brace.
    pub test_modules: Vec<Range<usize>>,
    /// Where each line starts.
    line_starts: Vec<usize>,
}

impl Source {
    /// Reads `text`, the contents of a Rust file.
    pub fn read(text: &str) -> Self {
        let (code, strings) = blank(text);
        let attributes = attributes(&code);
        let attribute_strings = strings
            .into_iter()
            .filter(|string| attributes.iter().any(|attribute| attribute.contains(&string.start)))
            .map(|string| AttributeString {
                at: string.start,
                text: text[string.clone()].to_owned(),
                key: key_before(&code, string.start - 1),
            })
            .collect();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
        Self {
            inline_modules: inline_modules(&code),
            test_modules: test_modules(&code),
            attribute_strings,
            line_starts,
            code,
        }
    }

    /// The line (from 1) of the byte at `at`.
    pub fn line(&self, at: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= at)
    }

    /// Whether the byte at `at` is inside a test module.
    pub fn in_test(&self, at: usize) -> bool {
        self.test_modules.iter().any(|range| range.contains(&at))
    }

    /// The names of the inline modules the byte at `at` is inside, outermost first.
    pub fn inline_path(&self, at: usize) -> Vec<&str> {
        self.inline_modules
            .iter()
            .filter(|module| module.body.contains(&at))
            .map(|module| module.name.as_str())
            .collect()
    }
}

/// Whether `byte` may be part of a word (an identifier or a keyword).
pub fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The words (identifiers and keywords) of `text`.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|word| !word.is_empty())
}

/// `source` with its comments, string literals and character literals blanked out (lines kept where they were),
/// and the byte ranges of the texts of its string literals (without their quotes and hashes).
fn blank(source: &str) -> (String, Vec<Range<usize>>) {
    let bytes = source.as_bytes();
    let mut code = bytes.to_vec();
    let mut strings = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|&byte| byte == b'\n').map_or(bytes.len(), |len| at + len)
        } else if rest.starts_with(b"/*") {
            block_comment_end(bytes, at)
        } else if rest[0] == b'"' {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            strings.push(at + 1..end.min(bytes.len()));
            end + 1
        } else if let Some(hashes) = raw_string_hashes(bytes, at) {
            let closing = [b"\"".as_slice(), &vec![b'#'; hashes]].concat();
            let body = at + 2 + hashes;
            let len = bytes[body..].windows(closing.len()).position(|window| window == closing);
            let text_end = len.map_or(bytes.len(), |len| body + len);
            strings.push(body..text_end);
            text_end + closing.len()
        } else if let Some(len) = char_literal_len(&source[at..]) {
            at + len
        } else {
            at += 1;
            continue;
        };
        let end = end.min(bytes.len());
        for byte in &mut code[at..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        at = end;
    }
    (String::from_utf8(code).expect("only whole characters were written over"), strings)
}

/// Where the block comment that opens at `at` (with `/*`) ends, nested comments counted: just past its `*/`.
fn block_comment_end(bytes: &[u8], at: usize) -> usize {
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
}

/// If a raw string (`r"…"`, `r#"…"#`, `br"…"`, `cr"…"`) starts at `at` (its `r`), the number of its hashes. A raw
/// identifier (`r#type`) is none.
fn raw_string_hashes(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes[at] != b'r' {
        return None;
    }
    // The `r` starts a word, or follows the `b` or `c` that starts one.
    let starts_word = |at: usize| at == 0 || !is_word_byte(bytes[at - 1]);
    let after_prefix = at > 0 && matches!(bytes[at - 1], b'b' | b'c') && starts_word(at - 1);
    if !starts_word(at) && !after_prefix {
        return None;
    }
    let hashes = bytes[at + 1..].iter().take_while(|&&byte| byte == b'#').count();
    (bytes.get(at + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// The length of the character literal (`'x'`, `'\''`, `'\u{2500}'`) that `text` starts with, if it starts with
/// one (and not with a lifetime or a label).
fn char_literal_len(text: &str) -> Option<usize> {
    let after_quote = text.strip_prefix('\'')?;
    if let Some(escaped) = after_quote.strip_prefix('\\') {
        // The escaped character, then anything up to the closing quote (`u{…}`).
        let first = escaped.chars().next()?;
        let close = escaped[first.len_utf8()..].find('\'')?;
        return Some(2 + first.len_utf8() + close + 1);
    }
    let inner = after_quote.chars().next()?;
    after_quote[inner.len_utf8()..].starts_with('\'').then_some(inner.len_utf8() + 2)
}

/// The byte ranges of the attributes of `code` (`#[…]` and `#![…]`), brackets included.
fn attributes(code: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices('#') {
        let rest = code[at + 1..].trim_start();
        let rest = rest.strip_prefix('!').map_or(rest, str::trim_start);
        if rest.starts_with('[') {
            let open = code.len() - rest.len();
            found.push(at..block_end(code, open, ('[', ']')));
        }
    }
    found
}

/// The word before the `=` that ends just before `at` in `code` (`with` in `with = "…"`), if one does.
fn key_before(code: &str, at: usize) -> Option<String> {
    let before = code[..at].trim_end().strip_suffix('=')?.trim_end();
    let start = before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |at| at + 1);
    let key = &before[start..];
    (!key.is_empty()).then(|| key.to_owned())
}

/// The byte ranges of `code`'s test modules: a module item (`mod name { … }`) under an attribute `#[cfg(…)]` that
/// names `test` (and not `not`), from the attribute to just past the module's closing brace.
fn test_modules(code: &str) -> Vec<Range<usize>> {
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
        let end = block_end(code, item_start + brace, ('{', '}'));
        modules.push(start..end);
        from = end;
    }
    modules
}

/// The inline modules of `code` (`mod name { … }`), in the order they open.
fn inline_modules(code: &str) -> Vec<InlineModule> {
    let mut modules = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("mod") {
        let after_keyword = &code[at + 3..];
        if (at > 0 && is_word_byte(bytes[at - 1])) || !after_keyword.starts_with(char::is_whitespace) {
            continue;
        }
        let name_and_rest = after_keyword.trim_start();
        let after_name = name_and_rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
        let name = &name_and_rest[..name_and_rest.len() - after_name.len()];
        if name.is_empty() || !after_name.trim_start().starts_with('{') {
            continue;
        }
        let open = code.len() - after_name.trim_start().len();
        modules.push(InlineModule { name: name.to_owned(), body: open..block_end(code, open, ('{', '}')) });
    }
    modules
}

/// Where the bracketed block that opens at `open` (an `open` bracket of `code`) ends: just past its matching
/// closing bracket, or at the end of `code`.
fn block_end(code: &str, open: usize, (opening, closing): (char, char)) -> usize {
    let mut depth = 0;
    let close = code[open..].char_indices().find_map(|(offset, c)| {
        if c == opening {
            depth += 1;
        } else if c == closing {
            depth -= 1;
        }
        (depth == 0).then_some(open + offset)
    });
    close.map_or(code.len(), |close| close + 1)
}

#[cfg(test)]
mod tests {
    use super::Source;

    #[test]
    fn comments_strings_and_char_literals_are_blanked_and_lines_kept() {
        let text = "\
let a = \"crate::x\"; // crate::y
/* crate::z /* nested */ still */ let b = r#\"crate::\"w\"#;
let c = ('\"', '\\'', '\\\\', '─', b'{', '\\u{2500}'); let d: &'static str = br\"q\";
let r#type = 1; fn f<'a>(x: &'a u8) {}
";
        let source = Source::read(text);
        assert_eq!(source.code.len(), text.len());
        assert_eq!(source.code.lines().count(), text.lines().count());
        for hidden in ["crate::", "nested", "still", "─", "'{'", "\\", "u{2500}"] {
            assert!(!source.code.contains(hidden), "{hidden:?} left in {:?}", source.code);
        }
        for kept in ["let a =", "let b =", "let d: &'static str = b ", "let r#type = 1;", "fn f<'a>(x: &'a u8)"] {
            assert!(source.code.contains(kept), "{kept:?} lost in {:?}", source.code);
        }
        assert_eq!(source.line(0), 1);
        assert_eq!(source.line(text.find("let b").unwrap()), 2);
        assert_eq!(source.line(text.find("r#type").unwrap()), 4);
    }

    #[test]
    fn attribute_strings_are_kept_with_their_keys() {
        let text = "#[serde(default, with = \"crate::baseline::sites\")]\nconst X: &str = \"crate::not\";\n\
                    #[doc = \"words\"]\nfn f() {}\n";
        let source = Source::read(text);
        let found: Vec<(&str, Option<&str>)> =
            source.attribute_strings.iter().map(|string| (string.text.as_str(), string.key.as_deref())).collect();
        assert_eq!(found, [("crate::baseline::sites", Some("with")), ("words", Some("doc"))]);
        assert_eq!(&text[source.attribute_strings[0].at..][..5], "crate");
    }

    #[test]
    fn test_and_inline_modules_are_found() {
        let text = "\
mod outer {
    mod inner { fn f() {} }
}
#[cfg(test)]
mod tests {
    use crate::a;
}
#[cfg(not(test))]
mod real { }
#[cfg(all(test, unix))]
#[expect(unused, reason = \"a test\")]
pub(super) mod more_tests { }
#[cfg(test)]
mod declared;
";
        let source = Source::read(text);
        let names: Vec<&str> = source.inline_modules.iter().map(|module| module.name.as_str()).collect();
        assert_eq!(names, ["outer", "inner", "tests", "real", "more_tests"]);
        assert_eq!(source.inline_path(text.find("fn f").unwrap()), ["outer", "inner"]);
        assert!(source.in_test(text.find("crate::a").unwrap()));
        assert!(!source.in_test(text.find("mod real").unwrap()));
        assert!(source.in_test(text.find("more_tests").unwrap()));
        assert_eq!(source.test_modules.len(), 2);
    }
}
