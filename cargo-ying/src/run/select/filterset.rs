//! `-E` filtersets: the part of cargo-nextest's filterset language that needs no package graph.
//!
//! Predicates: `all()`, `none()`, `default()` (every test), `test(M)`, `package(M)`, `binary(M)`, `binary_id(M)`
//! and `kind(M)`; operators, loosest first: `or` (`|`, `+`), then `and` (`&`) and `-` (difference, left to right),
//! then `not` (`!`); parentheses group. A name matcher `M` is `=exact`, `~substring`, `/regex/` or `#glob` (`*`
//! and `?`), or a bare string with the predicate's default: substring for `test()`, exact for `kind()`, glob for
//! the others, as in nextest. `deps()`, `rdeps()`, `platform()` and `group()` need what cargo ying does not have
//! and are refused with that reason.

use std::fmt;
use ying_report::{TargetKind, TestId};

/// A parsed filterset.
#[derive(Clone, Debug)]
pub(crate) struct Filterset {
    source: String,
    expr: Expr,
}

#[derive(Clone, Debug)]
enum Expr {
    All,
    None,
    Leaf(Field, Matcher),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Difference(Box<Expr>, Box<Expr>),
}

/// What a predicate looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Test,
    Package,
    Binary,
    BinaryId,
    Kind,
}

#[derive(Clone, Debug)]
enum Matcher {
    Equal(String),
    Contains(String),
    Glob(String),
    Regex(regex::Regex),
}

/// Why a filterset could not be parsed: what was expected, at which character (0-based, in characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// The filterset as given.
    pub source: String,
    /// Where, in characters from the start.
    pub position: usize,
    /// What is wrong there.
    pub message: String,
}

/// The most characters of a filterset an error shows on each side of where it went wrong.
const SHOWN_AROUND: usize = 40;
/// The deepest a filterset may nest (parentheses and `not`s): deeper, it is refused rather than parsed on a stack
/// that would overflow.
const MAX_NESTING: usize = 256;
/// The most operators (`and`, `or`, `-`) a filterset may have: each is a level of the tree a test is matched down.
const MAX_OPERATORS: usize = 4096;

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} at column {}", self.message, self.position + 1)?;
        // A long filterset is shown around the place, not whole.
        let chars: Vec<char> = self.source.chars().collect();
        let start = self.position.saturating_sub(SHOWN_AROUND);
        let end = (self.position + SHOWN_AROUND).min(chars.len());
        let before = if start > 0 { "..." } else { "" };
        let after = if end < chars.len() { "..." } else { "" };
        let shown: String = chars.get(start..end).unwrap_or_default().iter().collect();
        writeln!(f, "  {before}{shown}{after}")?;
        write!(f, "  {}^", " ".repeat(before.len() + self.position - start))
    }
}

impl std::error::Error for ParseError {}

impl Filterset {
    /// Parses `source`.
    pub(crate) fn parse(source: &str) -> Result<Self, ParseError> {
        let mut parser = Parser { chars: source.chars().collect(), at: 0, source, nesting: 0, operators: 0 };
        let expr = parser.or()?;
        parser.skip_space();
        if parser.at < parser.chars.len() {
            return Err(parser.error("expected an operator (`and`, `or`, `-`, `not`) or the end"));
        }
        Ok(Self { source: source.to_owned(), expr })
    }

    /// Whether the test `id` is in the set.
    pub(crate) fn matches(&self, id: &TestId) -> bool {
        self.expr.matches(id)
    }
}

impl fmt::Display for Filterset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Expr {
    fn matches(&self, id: &TestId) -> bool {
        match self {
            Self::All => true,
            Self::None => false,
            Self::Leaf(field, matcher) => match field {
                Field::Test => matcher.matches(&id.name),
                Field::Package => matcher.matches(&id.package),
                // A library's binary is named after its crate: the package's name with `_` for `-`.
                Field::Binary if id.kind == TargetKind::Lib => matcher.matches(&id.target.replace('-', "_")),
                Field::Binary => matcher.matches(&id.target),
                Field::BinaryId => matcher.matches(&id.binary_id()),
                Field::Kind => matcher.matches(id.kind.name()),
            },
            Self::Not(inner) => !inner.matches(id),
            Self::And(left, right) => left.matches(id) && right.matches(id),
            Self::Or(left, right) => left.matches(id) || right.matches(id),
            Self::Difference(left, right) => left.matches(id) && !right.matches(id),
        }
    }
}

impl Matcher {
    fn matches(&self, text: &str) -> bool {
        match self {
            Self::Equal(pattern) => text == pattern,
            Self::Contains(pattern) => text.contains(pattern.as_str()),
            Self::Glob(pattern) => glob_matches(pattern.as_bytes(), text.as_bytes()),
            Self::Regex(regex) => regex.is_match(text),
        }
    }
}

/// `*` matches any run of characters, `?` any one character; everything else itself.
fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

struct Parser<'a> {
    chars: Vec<char>,
    at: usize,
    source: &'a str,
    /// How deep the parser is in parentheses and `not`s.
    nesting: usize,
    /// How many operators it has read.
    operators: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        self.error_at(self.at, message)
    }

    fn error_at(&self, position: usize, message: impl Into<String>) -> ParseError {
        ParseError { source: self.source.to_owned(), position, message: message.into() }
    }

    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// Consumes the keyword `word` if it is next and stands alone (not the start of a longer name).
    fn keyword(&mut self, word: &str) -> bool {
        let end = self.at + word.chars().count();
        let matches = self.chars.get(self.at..end).is_some_and(|chars| chars.iter().copied().eq(word.chars()));
        let alone = self.chars.get(end).is_none_or(|c| !(c.is_alphanumeric() || *c == '_'));
        if matches && alone {
            self.at = end;
        }
        matches && alone
    }

    fn symbol(&mut self, symbol: char) -> bool {
        if self.peek() == Some(symbol) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Counts an operator; refuses one too many.
    fn operator(&mut self) -> Result<(), ParseError> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(self.error(format!("more than {MAX_OPERATORS} operators; split the filterset in several -E")));
        }
        Ok(())
    }

    /// Goes a level deeper; refuses to go too deep.
    fn deeper(&mut self) -> Result<(), ParseError> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            // At the parenthesis or `not` just read.
            let at = self.at.saturating_sub(1);
            return Err(self.error_at(at, format!("nested more than {MAX_NESTING} deep (parentheses and `not`s)")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        loop {
            self.skip_space();
            if self.keyword("or") || self.symbol('|') || self.symbol('+') {
                self.operator()?;
                left = Expr::Or(Box::new(left), Box::new(self.and()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.not()?;
        loop {
            self.skip_space();
            if self.keyword("and") || self.symbol('&') {
                self.operator()?;
                left = Expr::And(Box::new(left), Box::new(self.not()?));
            } else if self.symbol('-') {
                self.operator()?;
                left = Expr::Difference(Box::new(left), Box::new(self.not()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        self.skip_space();
        if self.keyword("not") || self.symbol('!') {
            self.deeper()?;
            let inner = self.not()?;
            self.nesting -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        self.skip_space();
        if self.symbol('(') {
            self.deeper()?;
            let inner = self.or()?;
            self.skip_space();
            if !self.symbol(')') {
                return Err(self.error("expected `)`"));
            }
            self.nesting -= 1;
            return Ok(inner);
        }
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.at += 1;
        }
        let name: String = self.chars[start..self.at].iter().collect();
        if name.is_empty() {
            return Err(self.error("expected a predicate such as `test(name)` or `package(name)`, or `(`"));
        }
        self.skip_space();
        if !self.symbol('(') {
            return Err(self.error(format!("expected `(` after `{name}`")));
        }
        let field = match name.as_str() {
            "all" | "default" => return self.empty_arguments(Expr::All),
            "none" => return self.empty_arguments(Expr::None),
            "test" => Field::Test,
            "package" => Field::Package,
            "binary" => Field::Binary,
            "binary_id" => Field::BinaryId,
            "kind" => Field::Kind,
            "deps" | "rdeps" => {
                return Err(self.error_at(
                    start,
                    format!("`{name}()` needs the package graph, which cargo ying does not read; name the packages with package()"),
                ));
            }
            "platform" | "group" => {
                return Err(self.error_at(start, format!("`{name}()` is not supported by cargo ying")));
            }
            _ => {
                return Err(self.error_at(
                    start,
                    format!(
                        "unknown predicate `{name}`; use all(), none(), test(), package(), binary(), binary_id() or kind()"
                    ),
                ));
            }
        };
        let matcher = self.matcher(field)?;
        Ok(Expr::Leaf(field, matcher))
    }

    fn empty_arguments(&mut self, expr: Expr) -> Result<Expr, ParseError> {
        self.skip_space();
        if self.symbol(')') { Ok(expr) } else { Err(self.error("expected `)`: this predicate takes no argument")) }
    }

    /// The name matcher after `predicate(`, through the closing `)`.
    fn matcher(&mut self, field: Field) -> Result<Matcher, ParseError> {
        self.skip_space();
        let start = self.at;
        if self.symbol('/') {
            let mut pattern = String::new();
            loop {
                match self.peek() {
                    None => return Err(self.error("expected `/` closing the regular expression")),
                    Some('\\') if self.chars.get(self.at + 1) == Some(&'/') => {
                        pattern.push('/');
                        self.at += 2;
                    }
                    Some('/') => {
                        self.at += 1;
                        break;
                    }
                    Some(c) => {
                        pattern.push(c);
                        self.at += 1;
                    }
                }
            }
            self.close()?;
            let regex = regex::Regex::new(&pattern)
                .map_err(|error| self.error_at(start, format!("invalid regular expression: {error}")))?;
            return Ok(Matcher::Regex(regex));
        }
        let kind = self.peek();
        if matches!(kind, Some('=' | '~' | '#')) {
            self.at += 1;
        }
        let mut text = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("expected `)`")),
                Some('\\') if self.chars.get(self.at + 1).is_some_and(|c| matches!(c, '(' | ')' | '\\' | ',')) => {
                    text.push(self.chars[self.at + 1]);
                    self.at += 2;
                }
                Some(')') => break,
                Some(c) => {
                    text.push(c);
                    self.at += 1;
                }
            }
        }
        let text = text.trim().to_owned();
        self.close()?;
        if text.is_empty() {
            return Err(self.error_at(start, "expected a name to match"));
        }
        Ok(match kind {
            Some('=') => Matcher::Equal(text),
            Some('~') => Matcher::Contains(text),
            Some('#') => Matcher::Glob(text),
            _ => match field {
                Field::Test => Matcher::Contains(text),
                Field::Kind => Matcher::Equal(text),
                Field::Package | Field::Binary | Field::BinaryId => Matcher::Glob(text),
            },
        })
    }

    fn close(&mut self) -> Result<(), ParseError> {
        self.skip_space();
        if self.symbol(')') { Ok(()) } else { Err(self.error("expected `)`")) }
    }
}

#[cfg(test)]
mod tests {
    use super::{Filterset, glob_matches};
    use ying_report::{TargetKind, TestId};

    fn ids() -> Vec<TestId> {
        vec![
            TestId::new("my-crate", TargetKind::Lib, "my-crate", "cache::tests::evicts"),
            TestId::new("my-crate", TargetKind::Test, "leaks", "box_leak"),
            TestId::new("my-crate", TargetKind::Bin, "tool", "tests::parses"),
            TestId::new("other", TargetKind::Test, "leaks", "cache_fills"),
        ]
    }

    /// The names of the tests `source` selects, as `binary_id name`.
    fn selected(source: &str) -> Vec<String> {
        let set = Filterset::parse(source).unwrap_or_else(|error| panic!("{source}: {error}"));
        ids().iter().filter(|id| set.matches(id)).map(ToString::to_string).collect()
    }

    #[test]
    fn predicates_use_nextests_default_matchers() {
        assert_eq!(selected("test(cache)"), ["my-crate cache::tests::evicts", "other::leaks cache_fills"]);
        assert_eq!(selected("package(my-*)").len(), 3);
        assert_eq!(selected("package(my)"), Vec::<String>::new(), "package() globs, it does not search");
        assert_eq!(selected("binary(my_crate)"), ["my-crate cache::tests::evicts"]);
        assert_eq!(selected("binary_id(my-crate::leaks)"), ["my-crate::leaks box_leak"]);
        assert_eq!(selected("kind(bin)"), ["my-crate::bin/tool tests::parses"]);
        assert_eq!(selected("all()").len(), 4);
        assert!(selected("none()").is_empty());
    }

    #[test]
    fn matchers_exact_contains_glob_and_regex() {
        assert_eq!(selected("test(=box_leak)"), ["my-crate::leaks box_leak"]);
        assert!(selected("test(=box)").is_empty());
        assert_eq!(selected("package(~crat)").len(), 3);
        assert_eq!(selected("test(#*::parses)"), ["my-crate::bin/tool tests::parses"]);
        assert_eq!(selected("test(/^cache_|evicts$/)").len(), 2);
    }

    #[test]
    fn operators_and_precedence() {
        assert_eq!(selected("package(my-crate) & test(leak)"), ["my-crate::leaks box_leak"]);
        assert_eq!(selected("package(my-crate) - kind(lib) - kind(bin)"), ["my-crate::leaks box_leak"]);
        assert_eq!(selected("not package(my-crate)"), ["other::leaks cache_fills"]);
        assert_eq!(selected("!kind(test) and package(other)"), Vec::<String>::new());
        // `and` binds tighter than `or`.
        assert_eq!(selected("kind(bin) or package(other) and test(cache)").len(), 2);
        assert_eq!(selected("(kind(bin) + package(other)) & test(cache)"), ["other::leaks cache_fills"]);
        assert_eq!(selected("kind(lib) | kind(bin)").len(), 2);
    }

    #[test]
    fn errors_say_what_and_where() {
        let error = |source: &str| Filterset::parse(source).unwrap_err();
        let unknown = error("tset(a)");
        assert_eq!(unknown.position, 0);
        assert!(unknown.message.contains("unknown predicate `tset`"), "{unknown}");
        assert_eq!(error("test(a").message, "expected `)`");
        assert_eq!(error("test(a) test(b)").position, 8);
        assert!(error("deps(a)").message.contains("package graph"));
        assert!(error("test(/(/)").message.contains("invalid regular expression"));
        assert!(error("test()").message.contains("expected a name"));
        assert!(error("all(x)").message.contains("takes no argument"));
        assert_eq!(
            error("test(a) and").to_string(),
            "expected a predicate such as `test(name)` or `package(name)`, or `(` at column 12\n  test(a) and\n             ^"
        );
    }

    /// A filterset deeper or longer than a stack can take is refused with where, not parsed until it overflows.
    #[test]
    fn a_filterset_too_deep_or_too_long_is_an_error_not_a_crash() {
        let deep = format!("{}test(a){}", "(".repeat(10_000), ")".repeat(10_000));
        let error = Filterset::parse(&deep).unwrap_err();
        assert!(error.message.contains("nested more than 256 deep"), "{error}");
        assert_eq!(error.position, 256);
        let shown = error.to_string();
        assert!(shown.lines().all(|line| line.chars().count() < 100), "shown around the place: {shown}");
        let nots = format!("{}test(a)", "!".repeat(100_000));
        assert!(Filterset::parse(&nots).unwrap_err().message.contains("nested more than 256 deep"));
        let long = vec!["test(a)"; 100_000].join(" | ");
        assert!(Filterset::parse(&long).unwrap_err().message.contains("more than 4096 operators"));
        // Just within the limits, it parses and matches.
        let within = format!("{}test(a){}", "(".repeat(256), ")".repeat(256));
        assert!(Filterset::parse(&within).unwrap().matches(&ids()[0]));
        assert!(Filterset::parse(&vec!["test(a)"; 4097].join(" | ")).is_ok());
    }

    #[test]
    fn globs() {
        assert!(glob_matches(b"a*c", b"abbbc") && glob_matches(b"*", b"") && glob_matches(b"a?c", b"abc"));
        assert!(!glob_matches(b"a*c", b"abcd") && !glob_matches(b"a?c", b"ac"));
        assert!(glob_matches(b"*b*b*", b"abxb") && !glob_matches(b"*b*b*", b"abx"));
    }
}
