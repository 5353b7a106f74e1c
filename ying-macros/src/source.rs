//! What the source file says about the function, where the attribute's input cannot say it.
//!
//! An attribute sees only the attributes written after it: `#[test]` written before `#[ying::leak_test]` has
//! already expanded (registering the test) when the leak test expands, and leaves no trace on the function. The
//! attribute reads the function back from its file to tell whether a test attribute is written on it.

use crate::args::is_test_attribute;
use quote::ToTokens;
use syn::{ItemFn, Stmt};

/// Whether the function, as written in its source file, carries a test attribute (`#[test]`, `#[tokio::test]`, in
/// any position). `None` when the file cannot say: no local file (a macro's output, an IDE), or not one function
/// of that name and body in it.
pub(crate) fn has_test_attribute(function: &ItemFn) -> Option<bool> {
    let path = function.sig.ident.span().unwrap().local_file()?;
    let text = std::fs::read_to_string(path).ok()?;
    let file = syn::parse_file(&text).ok()?;
    written_with_test_attribute(&file, function)
}

fn written_with_test_attribute(file: &syn::File, function: &ItemFn) -> Option<bool> {
    let mut written = Vec::new();
    find(&file.items, function, &mut written);
    match written.as_slice() {
        [only] => Some(only.attrs.iter().any(is_test_attribute)),
        _ => None,
    }
}

/// The functions in `items` (and in the modules and function bodies among them) that are `function` as written:
/// same name, signature and body.
fn find<'a>(items: &'a [syn::Item], function: &ItemFn, found: &mut Vec<&'a ItemFn>) {
    for item in items {
        match item {
            syn::Item::Fn(candidate) => {
                if candidate.sig.ident == function.sig.ident && same_function(candidate, function) {
                    found.push(candidate);
                }
                for stmt in &candidate.block.stmts {
                    if let Stmt::Item(item) = stmt {
                        find(core::slice::from_ref(item), function, found);
                    }
                }
            }
            syn::Item::Mod(module) => {
                if let Some((_, items)) = &module.content {
                    find(items, function, found);
                }
            }
            _ => {}
        }
    }
}

fn same_function(a: &ItemFn, b: &ItemFn) -> bool {
    let tokens =
        |function: &ItemFn| (function.sig.to_token_stream().to_string(), function.block.to_token_stream().to_string());
    tokens(a) == tokens(b)
}

#[cfg(test)]
mod tests {
    use super::written_with_test_attribute as written;

    const FILE: &str = r#"
        #[test]
        #[ying::leak_test]
        fn first() { work(1); }

        mod nested {
            #[ying::leak_test]
            fn first() { work(2); }

            fn outer() {
                #[tokio::test]
                #[ying::leak_test]
                async fn inside_a_body() {}
            }
        }

        #[ying::leak_test]
        fn same() {}
        mod again {
            #[test]
            #[ying::leak_test]
            fn same() {}
        }
    "#;

    /// Whether the one function of `source`'s name and body in [`FILE`] has a test attribute; `None` if not one.
    fn written_with_test_attribute(source: &str) -> Option<bool> {
        written(&syn::parse_file(FILE).unwrap(), &syn::parse_str(source).unwrap())
    }

    #[test]
    fn the_function_is_found_by_name_and_body_in_modules_and_bodies() {
        assert_eq!(written_with_test_attribute("fn first() { work(1); }"), Some(true));
        assert_eq!(written_with_test_attribute("fn first() { work(2); }"), Some(false));
        assert_eq!(written_with_test_attribute("async fn inside_a_body() {}"), Some(true));
    }

    #[test]
    fn an_ambiguous_or_missing_function_says_nothing() {
        assert_eq!(written_with_test_attribute("fn same() {}"), None);
        assert_eq!(written_with_test_attribute("fn first() { work(3); }"), None);
    }
}
