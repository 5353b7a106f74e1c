//! Validation: every argument checked against what `leak_test` accepts, errors on the offending tokens naming the
//! fix; all errors reported at once.

use crate::args::Arg;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit};

/// How a test's figures are attributed, as written in `attribution = "..."`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attribution {
    Thread,
    Process,
}

/// The arguments of one `#[leak_test(...)]`, checked; `None` where not written.
#[derive(Debug, Default)]
pub(crate) struct LeakTestArgs {
    pub(crate) max_retained: Option<u64>,
    pub(crate) max_peak: Option<u64>,
    pub(crate) max_allocated: Option<u64>,
    pub(crate) max_allocations: Option<u64>,
    pub(crate) max_growth_per_iteration: Option<u64>,
    pub(crate) warmup: u32,
    pub(crate) iterations: Option<u32>,
    pub(crate) attribution: Option<Attribution>,
    pub(crate) allow: Vec<String>,
    /// The function also carries `#[should_panic]`.
    pub(crate) should_panic: bool,
}

/// What kind of value a key takes.
#[derive(Clone, Copy)]
enum Kind {
    Size,
    Count,
    NonZeroCount,
    Attribution,
    Patterns,
}

const KEYS: &[(&str, Kind)] = &[
    ("max_retained", Kind::Size),
    ("max_peak", Kind::Size),
    ("max_allocated", Kind::Size),
    ("max_allocations", Kind::Count),
    ("max_growth_per_iteration", Kind::Size),
    ("warmup", Kind::Count),
    ("iterations", Kind::NonZeroCount),
    ("attribution", Kind::Attribution),
    ("allow", Kind::Patterns),
];

/// A checked value.
enum Value {
    Bytes(u64),
    Count(u64),
    Attribution(Attribution),
    Patterns(Vec<String>),
}

/// Checks `args` (and the function's own attributes) into [`LeakTestArgs`].
pub(crate) fn validate(args: Vec<Arg>, function: &syn::ItemFn) -> syn::Result<LeakTestArgs> {
    let mut checked = LeakTestArgs {
        should_panic: function.attrs.iter().any(|attr| attr.path().is_ident("should_panic")),
        ..LeakTestArgs::default()
    };
    let mut errors: Option<syn::Error> = None;
    let mut push = |error: syn::Error| match &mut errors {
        Some(errors) => errors.combine(error),
        None => errors = Some(error),
    };
    let mut seen: Vec<String> = Vec::new();
    let mut growth_key = None;
    for arg in args {
        let key = arg.key.to_string();
        let Some(&(_, kind)) = KEYS.iter().find(|(name, _)| *name == key) else {
            push(syn::Error::new(arg.key.span(), unknown_key_message(&key)));
            continue;
        };
        if seen.contains(&key) {
            push(syn::Error::new(arg.key.span(), format!("duplicate argument `{key}`; give it once")));
            continue;
        }
        seen.push(key.clone());
        if key == "max_growth_per_iteration" {
            growth_key = Some(arg.key.span());
        }
        match check_value(&key, kind, &arg.value) {
            Ok(value) => store(&mut checked, &key, value),
            Err(error) => push(error),
        }
    }
    if let Some(span) = growth_key.filter(|_| !seen.iter().any(|key| key == "iterations")) {
        push(syn::Error::new(
            span,
            "`max_growth_per_iteration` is judged over measured runs, and without `iterations` there is one: add \
             `iterations = N` (and `warmup = 1` for one-time initialisation), or budget the one run with \
             `max_retained`",
        ));
    }
    if let Some(second) = function.attrs.iter().find(|attr| crate::args::is_leak_test_attribute(attr)) {
        push(syn::Error::new_spanned(
            second,
            format!(
                "`#[ying::leak_test]` is written twice on `{}`: remove the second one and give all the arguments \
                 to one attribute",
                function.sig.ident
            ),
        ));
    }
    if function.sig.asyncness.is_some() && !function.attrs.iter().any(crate::args::is_test_attribute) {
        push(syn::Error::new(
            function.sig.fn_token.span,
            "an `async fn` leak test needs an async test attribute to run it, such as `#[tokio::test]`",
        ));
    }
    match errors {
        Some(errors) => Err(errors),
        None => Ok(checked),
    }
}

fn store(args: &mut LeakTestArgs, key: &str, value: Value) {
    match (key, value) {
        ("max_retained", Value::Bytes(bytes)) => args.max_retained = Some(bytes),
        ("max_peak", Value::Bytes(bytes)) => args.max_peak = Some(bytes),
        ("max_allocated", Value::Bytes(bytes)) => args.max_allocated = Some(bytes),
        ("max_growth_per_iteration", Value::Bytes(bytes)) => args.max_growth_per_iteration = Some(bytes),
        ("max_allocations", Value::Count(count)) => args.max_allocations = Some(count),
        ("warmup", Value::Count(count)) => args.warmup = count as u32,
        ("iterations", Value::Count(count)) => args.iterations = Some(count as u32),
        ("attribution", Value::Attribution(attribution)) => args.attribution = Some(attribution),
        ("allow", Value::Patterns(patterns)) => args.allow = patterns,
        _ => unreachable!("`KEYS` and `check_value` agree on every key's kind"),
    }
}

fn check_value(key: &str, kind: Kind, value: &Expr) -> syn::Result<Value> {
    match kind {
        Kind::Size => match literal(value) {
            // One grammar for every size ying reads: the attribute's, the command line's and the configuration's.
            Some(Lit::Str(text)) => size(&text.value()).map_err(|why| syn::Error::new(text.span(), why)),
            Some(Lit::Int(int)) => size(&int.to_string()).map_err(|why| syn::Error::new(int.span(), why)),
            _ => Err(syn::Error::new(
                value.span(),
                format!("expected a size for `{key}`, like `{key} = \"64 KiB\"` or a number of bytes"),
            )),
        },
        Kind::Count | Kind::NonZeroCount => {
            let Some(Lit::Int(int)) = literal(value) else {
                return Err(syn::Error::new(
                    value.span(),
                    format!("expected a whole number for `{key}`, like `{key} = {}`", example_count(key)),
                ));
            };
            let limit = if key == "max_allocations" { u64::MAX } else { u64::from(u32::MAX) };
            let too_large =
                || syn::Error::new(int.span(), format!("`{key} = {int}` is too large; `{key}` is at most {limit}"));
            let count = int.base10_parse::<u64>().map_err(|_| too_large())?;
            if count > limit {
                return Err(too_large());
            }
            if matches!(kind, Kind::NonZeroCount) && count == 0 {
                return Err(syn::Error::new(
                    int.span(),
                    format!("`{key} = 0` would measure nothing; use at least 1, or leave `{key}` out for one run"),
                ));
            }
            Ok(Value::Count(count))
        }
        Kind::Attribution => match literal(value) {
            Some(Lit::Str(text)) if text.value() == "thread" => Ok(Value::Attribution(Attribution::Thread)),
            Some(Lit::Str(text)) if text.value() == "process" => Ok(Value::Attribution(Attribution::Process)),
            _ => {
                Err(syn::Error::new(value.span(), "expected `attribution = \"thread\"` or `attribution = \"process\"`"))
            }
        },
        Kind::Patterns => {
            let Expr::Array(array) = value else {
                return Err(syn::Error::new(
                    value.span(),
                    "expected a list of patterns, like `allow = [\"regex::\", \"my_crate::interner\"]`",
                ));
            };
            array
                .elems
                .iter()
                .map(|element| match literal(element) {
                    Some(Lit::Str(text)) if !text.value().is_empty() => Ok(text.value()),
                    Some(Lit::Str(text)) => {
                        Err(syn::Error::new(text.span(), "an empty pattern would excuse everything"))
                    }
                    _ => Err(syn::Error::new(
                        element.span(),
                        "expected a string: a part of the function names to excuse, like \"regex::\"",
                    )),
                })
                .collect::<syn::Result<Vec<_>>>()
                .map(Value::Patterns)
        }
    }
}

/// A size in ying's one size grammar.
fn size(text: &str) -> Result<Value, ying_report::SizeError> {
    ying_report::ByteSize::parse(text).map(|size| Value::Bytes(size.bytes()))
}

fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(group) => literal(&group.expr),
        _ => None,
    }
}

fn example_count(key: &str) -> &'static str {
    match key {
        "max_allocations" => "10_000",
        "iterations" => "5",
        _ => "1",
    }
}

fn unknown_key_message(key: &str) -> String {
    let names: Vec<&str> = KEYS.iter().map(|(name, _)| *name).collect();
    let hint =
        ying_report::closest_key(key, &names).map_or_else(String::new, |name| format!("did you mean `{name}`? "));
    format!("unknown argument `{key}`; {hint}expected one of: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::{Kind, Value, check_value, unknown_key_message};

    /// The bytes a size argument written as `tokens` means, or its error.
    fn size(tokens: &str) -> Result<u64, String> {
        let expr: syn::Expr = syn::parse_str(tokens).unwrap_or_else(|error| panic!("{tokens}: {error}"));
        match check_value("max_retained", Kind::Size, &expr) {
            Ok(Value::Bytes(bytes)) => Ok(bytes),
            Ok(_) => panic!("a size argument gives bytes"),
            Err(error) => Err(error.to_string()),
        }
    }

    #[test]
    fn sizes_read_the_one_size_grammar_as_strings_and_as_integers() {
        for &(text, expected) in ying_report::size::EXAMPLES {
            let mut forms = vec![format!("{text:?}")];
            // Integer literals where the text is one (`512`, `10_000`, `4096u8`).
            let trimmed = text.trim();
            if trimmed.starts_with(|c: char| c.is_ascii_digit())
                && trimmed.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                forms.push(trimmed.to_owned());
            }
            for form in forms {
                match (size(&form), expected) {
                    (Ok(bytes), Ok(expected)) => assert_eq!(bytes, expected, "{form}"),
                    (Err(error), Err(part)) => assert!(error.contains(part), "{form}: {error}"),
                    (got, expected) => panic!("{form}: got {got:?}, expected {expected:?}"),
                }
            }
        }
    }

    #[test]
    fn an_oversized_count_names_the_key_and_its_limit() {
        let check = |key: &str, tokens: &str| {
            let expr: syn::Expr = syn::parse_str(tokens).unwrap();
            check_value(key, Kind::Count, &expr).err().map(|error| error.to_string())
        };
        assert_eq!(
            check("max_allocations", "99999999999999999999").as_deref(),
            Some(
                "`max_allocations = 99999999999999999999` is too large; `max_allocations` is at most 18446744073709551615"
            )
        );
        assert_eq!(
            check("warmup", "4294967296").as_deref(),
            Some("`warmup = 4294967296` is too large; `warmup` is at most 4294967295")
        );
        assert_eq!(check("warmup", "4294967295"), None);
    }

    #[test]
    fn unknown_keys_get_the_closest_suggestion() {
        assert!(unknown_key_message("max_retain").contains("did you mean `max_retained`?"));
        assert!(!unknown_key_message("colour").contains("did you mean"));
    }
}
