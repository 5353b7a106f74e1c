//! Validation: every argument checked against the table of what `leak_test` accepts
//! ([`ying_report::arguments::ARGUMENTS`]), errors on the offending tokens naming the fix; all errors reported at
//! once.

use crate::args::Arg;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr};
use ying_report::arguments::{self, ATTRIBUTIONS, Argument, Kind};

/// The arguments of one `#[leak_test(...)]`, checked.
pub(crate) struct LeakTestArgs {
    /// The arguments the runtime reads, each by its name in the table, in the order written.
    pub(crate) written: Vec<(&'static str, Value)>,
    /// The path the generated code names the runtime by: `crate = "..."`, or `::ying`.
    pub(crate) runtime: syn::Path,
    /// The function also carries `#[should_panic]`.
    pub(crate) should_panic: bool,
}

/// A checked value the runtime reads, in the form its kind is written into the test
/// ([`ying_report::arguments::Value`]); strings keep the spans they were written with.
pub(crate) enum Value {
    Number(u64),
    Text(LitStr),
    List(Vec<LitStr>),
}

/// A checked value: one the runtime reads, or the runtime's path ([`Kind::RuntimePath`]), which the expansion
/// names the runtime by.
enum Checked {
    Value(Value),
    RuntimePath(syn::Path),
}

/// The path the generated code names the runtime by when `crate` is not written.
fn default_runtime() -> syn::Path {
    syn::parse_quote!(::ying)
}

/// Checks `args` (and the function's own attributes) into [`LeakTestArgs`].
pub(crate) fn validate(args: Vec<Arg>, function: &syn::ItemFn) -> syn::Result<LeakTestArgs> {
    let mut checked = LeakTestArgs {
        written: Vec::new(),
        runtime: default_runtime(),
        should_panic: function.attrs.iter().any(|attr| attr.path().is_ident("should_panic")),
    };
    let mut errors: Option<syn::Error> = None;
    let mut push = |error: syn::Error| match &mut errors {
        Some(errors) => errors.combine(error),
        None => errors = Some(error),
    };
    let mut seen: Vec<(&'static Argument, Span)> = Vec::new();
    for arg in args {
        let key = arg.key.to_string();
        let Some(argument) = arguments::argument(&key) else {
            push(syn::Error::new(arg.key.span(), unknown_key_message(&key)));
            continue;
        };
        if seen.iter().any(|(earlier, _)| earlier.name == argument.name) {
            push(syn::Error::new(arg.key.span(), format!("duplicate argument `{key}`; give it once")));
            continue;
        }
        seen.push((argument, arg.key.span()));
        match check_value(argument, &arg.value) {
            Ok(Checked::Value(value)) => checked.written.push((argument.name, value)),
            Ok(Checked::RuntimePath(path)) => checked.runtime = path,
            Err(error) => push(error),
        }
    }
    for (argument, span) in &seen {
        if let Some(need) = argument.needs.filter(|need| !seen.iter().any(|(other, _)| other.name == need.argument)) {
            push(syn::Error::new(*span, need.message));
        }
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
    let sig = &function.sig;
    if let Some(constness) = &sig.constness {
        push(syn::Error::new(
            constness.span,
            "a leak test cannot be a `const fn`: its body runs measured when the test runs; remove `const`",
        ));
    }
    if !sig.generics.params.is_empty() {
        push(syn::Error::new_spanned(
            &sig.generics,
            "a leak test takes no generic parameters: the test harness calls it as it is; call a generic function \
             from its body instead",
        ));
    }
    if !sig.inputs.is_empty() {
        push(syn::Error::new_spanned(
            &sig.inputs,
            "a leak test takes no arguments: the test harness calls it with none; build what it needs in its body",
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

/// Checks `value` against the kind of `argument`.
fn check_value(argument: &Argument, value: &Expr) -> syn::Result<Checked> {
    let Argument { name: key, example, .. } = *argument;
    match argument.kind {
        Kind::Size(_) => match literal(value) {
            // One grammar for every size ying reads: the attribute's, the command line's and the configuration's.
            Some(Lit::Str(text)) => size(&text.value()).map_err(|why| syn::Error::new(text.span(), why)),
            Some(Lit::Int(int)) => size(&int.to_string()).map_err(|why| syn::Error::new(int.span(), why)),
            _ if matches!(value, Expr::Path(_)) => Err(syn::Error::new(
                value.span(),
                format!(
                    "expected a size for `{key}`, like `{key} = {example}` or a number of bytes: an attribute reads \
                     no constant, write its value"
                ),
            )),
            _ => Err(syn::Error::new(
                value.span(),
                format!("expected a size for `{key}`, like `{key} = {example}` or a number of bytes"),
            )),
        },
        Kind::Count { min, max, .. } => {
            let Some(Lit::Int(int)) = literal(value) else {
                return Err(syn::Error::new(
                    value.span(),
                    format!("expected a whole number for `{key}`, like `{key} = {example}`"),
                ));
            };
            let too_large =
                || syn::Error::new(int.span(), format!("`{key} = {int}` is too large; `{key}` is at most {max}"));
            let count = int.base10_parse::<u64>().map_err(|_| too_large())?;
            if count > max {
                return Err(too_large());
            }
            if count < min {
                return Err(syn::Error::new(
                    int.span(),
                    format!(
                        "`{key} = {count}` would measure nothing; use at least {min}, or leave `{key}` out for one run"
                    ),
                ));
            }
            Ok(Checked::Value(Value::Number(count)))
        }
        Kind::Attribution(_) => match literal(value) {
            Some(Lit::Str(text)) if ATTRIBUTIONS.iter().any(|(name, _)| *name == text.value()) => {
                Ok(Checked::Value(Value::Text(text.clone())))
            }
            _ => {
                let choices: Vec<String> = ATTRIBUTIONS.iter().map(|(name, _)| format!("`{key} = {name:?}`")).collect();
                Err(syn::Error::new(value.span(), format!("expected {}", choices.join(" or "))))
            }
        },
        Kind::Patterns(_) => {
            let Expr::Array(array) = value else {
                return Err(syn::Error::new(
                    value.span(),
                    format!("expected a list of patterns, like `{key} = {example}`"),
                ));
            };
            array
                .elems
                .iter()
                .map(|element| match literal(element) {
                    Some(Lit::Str(text)) if text.value().is_empty() => {
                        Err(syn::Error::new(text.span(), "an empty pattern would excuse everything"))
                    }
                    Some(Lit::Str(text)) => match ying_report::excuses_every_test(&text.value()) {
                        Some(why) => Err(syn::Error::new(text.span(), why)),
                        None => Ok(text.clone()),
                    },
                    _ => Err(syn::Error::new(
                        element.span(),
                        "expected a string: a part of the function names to excuse, like \"regex::\"",
                    )),
                })
                .collect::<syn::Result<Vec<_>>>()
                .map(|patterns| Checked::Value(Value::List(patterns)))
        }
        Kind::RuntimePath => {
            // The example is a string holding the name of a renamed dependency: `"yr"`.
            let renamed = example.trim_matches('"');
            let Some(Lit::Str(text)) = literal(value) else {
                return Err(syn::Error::new(
                    value.span(),
                    format!(
                        "expected the path of `ying-runtime` as a string for `{key}`, like `{key} = {example}` \
                         when this crate depends on it as `{renamed}`"
                    ),
                ));
            };
            // A path without generic arguments, as `use` takes: `yr`, `::yr`, `support::ying`.
            text.parse_with(syn::Path::parse_mod_style).map(Checked::RuntimePath).map_err(|_| {
                syn::Error::new(
                    text.span(),
                    format!(
                        "`{key} = {:?}` is not a path; give the name this crate depends on `ying-runtime` by, like \
                         `{key} = {example}` for `{renamed} = {{ package = \"ying-runtime\", .. }}`",
                        text.value()
                    ),
                )
            })
        }
    }
}

/// A size in ying's one size grammar.
fn size(text: &str) -> Result<Checked, ying_report::SizeError> {
    ying_report::ByteSize::parse(text).map(|size| Checked::Value(Value::Number(size.bytes())))
}

fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(group) => literal(&group.expr),
        _ => None,
    }
}

fn unknown_key_message(key: &str) -> String {
    let names: Vec<&str> = arguments::names().collect();
    let hint =
        ying_report::closest_key(key, &names).map_or_else(String::new, |name| format!("did you mean `{name}`? "));
    format!("unknown argument `{key}`; {hint}expected one of: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::{Checked, Value, check_value, unknown_key_message};
    use ying_report::arguments::argument;

    /// The value of argument `key` written as `tokens`, checked, or its error.
    fn check(key: &str, tokens: &str) -> Result<Checked, String> {
        let expr: syn::Expr = syn::parse_str(tokens).unwrap_or_else(|error| panic!("{tokens}: {error}"));
        check_value(argument(key).unwrap(), &expr).map_err(|error| error.to_string())
    }

    /// The bytes a size argument written as `tokens` means, or its error.
    fn size(tokens: &str) -> Result<u64, String> {
        match check("max_retained", tokens) {
            Ok(Checked::Value(Value::Number(bytes))) => Ok(bytes),
            Ok(_) => panic!("a size argument gives bytes"),
            Err(error) => Err(error),
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
        let error = |key: &str, tokens: &str| check(key, tokens).err();
        assert_eq!(
            error("max_allocations", "99999999999999999999").as_deref(),
            Some(
                "`max_allocations = 99999999999999999999` is too large; `max_allocations` is at most 18446744073709551615"
            )
        );
        assert_eq!(
            error("warmup", "4294967296").as_deref(),
            Some("`warmup = 4294967296` is too large; `warmup` is at most 4294967295")
        );
        assert_eq!(error("warmup", "4294967295"), None);
    }

    #[test]
    fn the_runtime_path_is_a_path_without_generic_arguments_written_as_a_string() {
        let path = |tokens: &str| match check("crate", tokens) {
            Ok(Checked::RuntimePath(path)) => Ok(quote::ToTokens::to_token_stream(&path).to_string()),
            Ok(_) => panic!("`crate` gives a path"),
            Err(error) => Err(error),
        };
        assert_eq!(path(r#""yr""#).as_deref(), Ok("yr"));
        assert_eq!(path(r#""::yr""#).as_deref(), Ok(":: yr"));
        assert_eq!(path(r#""support::ying""#).as_deref(), Ok("support :: ying"));
        let fix = concat!(
            r#"give the name this crate depends on `ying-runtime` by, like `crate = "yr"` "#,
            r#"for `yr = { package = "ying-runtime", .. }`"#,
        );
        for refused in [r#""ying<u8>""#, r#""""#, r#""yr::""#, r#""not a path""#] {
            let error = path(refused).unwrap_err();
            assert_eq!(error, format!("`crate = {refused}` is not a path; {fix}"));
        }
        assert!(path("yr").unwrap_err().starts_with("expected the path of `ying-runtime` as a string for `crate`"));
    }

    #[test]
    fn unknown_keys_get_the_closest_suggestion() {
        assert!(unknown_key_message("max_retain").contains("did you mean `max_retained`?"));
        assert!(!unknown_key_message("colour").contains("did you mean"));
    }
}
