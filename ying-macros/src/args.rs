//! Parsing: `key = value` pairs, each kept with the spans of its key and value, and what the function's own
//! attributes say.

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// One `key = value` argument.
pub(crate) struct Arg {
    pub(crate) key: Ident,
    pub(crate) value: Expr,
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // Keywords too: `crate = "..."` is an argument.
        let key = Ident::parse_any(input)
            .map_err(|error| syn::Error::new(error.span(), "expected an argument like `max_retained = \"64 KiB\"`"))?;
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key} = ...`: every argument of `leak_test` is a `key = value` pair"),
            ));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        Ok(Self { key, value })
    }
}

/// Parses the attribute's arguments.
pub(crate) fn parse(args: TokenStream) -> syn::Result<Vec<Arg>> {
    let parser = Punctuated::<Arg, Token![,]>::parse_terminated;
    Ok(syn::parse::Parser::parse2(parser, args)?.into_iter().collect())
}

/// Attributes that already make the function a test: `#[test]`, `#[tokio::test]` and the like.
pub(crate) fn is_test_attribute(attr: &syn::Attribute) -> bool {
    matches!(attr.style, syn::AttrStyle::Outer) && last_segment_is(attr, "test")
}

/// `#[ying::leak_test]` (or `#[leak_test]`, imported).
pub(crate) fn is_leak_test_attribute(attr: &syn::Attribute) -> bool {
    matches!(attr.style, syn::AttrStyle::Outer) && last_segment_is(attr, "leak_test")
}

fn last_segment_is(attr: &syn::Attribute, name: &str) -> bool {
    attr.path().segments.last().is_some_and(|segment| segment.ident == name)
}
