//! Expansion: the test function, its body run by `ying`'s leak-test runner. Generated code names everything by
//! absolute path (`::core::...`), and the runtime through its `__private` module under the path `crate = "..."`
//! gives (`::ying` by default).

use crate::validate::{LeakTestArgs, Value};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::{AttrStyle, ItemFn, ReturnType, Type, parse_quote};

/// Re-emits an `async fn` test below its async test attribute: `#[tokio::test]` (or the like) expands first into
/// the synchronous test that builds the runtime, and the leak test then wraps all of it, whichever order the two
/// attributes were written in. The attribute is named through `runtime`, the path the arguments give the runtime.
/// The body itself runs through the runtime's `body_end`, which looks at the tasks it left as it ends, inside the
/// runtime (an attribute written before this one has expanded already, and its body is out of reach).
pub(crate) fn defer_to_async_attribute(
    raw_args: TokenStream,
    runtime: &syn::Path,
    mut function: ItemFn,
) -> TokenStream {
    // After the other outer attributes; inner ones (`#![allow(..)]`) stay at the start of the body.
    function.attrs.push(parse_quote!(#[#runtime::leak_test(#raw_args)]));
    let output = match &function.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) if matches!(**ty, Type::ImplTrait(_)) => quote!(_),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let block = &function.block;
    function.block = parse_quote!({ #runtime::__private::body_end::<#output>(async move #block).await });
    function.into_token_stream()
}

/// The arguments as the runtime reads them: (name, value) pairs, each value in the form of
/// `ying_report::arguments::Value` its kind takes.
fn written(args: &LeakTestArgs) -> impl Iterator<Item = TokenStream> + '_ {
    let runtime = &args.runtime;
    args.written.iter().map(move |(name, value)| {
        let value = match value {
            Value::Number(number) => quote!(#runtime::__private::Value::Number(#number)),
            Value::Text(text) => quote!(#runtime::__private::Value::Text(#text)),
            Value::List(items) => quote!(#runtime::__private::Value::List(&[#(#items),*])),
        };
        quote!((#name, #value))
    })
}

/// Writes the leak test; `registered`: a test attribute already registers the function with the test harness
/// (written after the leak test, or before it and expanded already), so it gets no second one.
pub(crate) fn expand(args: &LeakTestArgs, function: ItemFn, registered: bool) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    // Inner attributes (`#![allow(..)]` at the start of the body) go at the start of the generated body.
    let (attrs, inner_attrs): (Vec<_>, Vec<_>) =
        attrs.into_iter().partition(|attr| matches!(attr.style, AttrStyle::Outer));
    let name = sig.ident.to_string();
    let line = quote_spanned!(sig.ident.span()=> ::core::line!());
    let test_attribute = (!registered).then(|| quote!(#[::core::prelude::v1::test]));
    let runtime = &args.runtime;
    // The path as a user writes it in an attribute (`yr`, `support::ying`), for the messages that name a fix.
    let runtime_name = runtime.segments.iter().map(|segment| segment.ident.to_string()).collect::<Vec<_>>().join("::");
    let written = written(args);
    let should_panic = args.should_panic;

    // The body as a closure the runner calls. An opaque return type (`-> impl Termination`) cannot be a closure's:
    // its value is reported (as the test harness would) into the `ExitCode` the runner judges and the test returns.
    let body = match &sig.output {
        ReturnType::Default => quote!(|| -> () #block),
        ReturnType::Type(_, ty) if matches!(**ty, Type::ImplTrait(_)) => quote! {
            || -> ::std::process::ExitCode { ::std::process::Termination::report((|| #block)()) }
        },
        ReturnType::Type(_, ty) => quote!(|| -> #ty #block),
    };
    quote! {
        #test_attribute
        #(#attrs)*
        #vis #sig {
            #(#inner_attrs)*
            static __YING_LEAK_TEST: #runtime::__private::LeakTest = #runtime::__private::LeakTest {
                package: ::core::env!("CARGO_PKG_NAME"),
                bin_name: ::core::option_env!("CARGO_BIN_NAME"),
                module_path: ::core::module_path!(),
                name: #name,
                file: ::core::file!(),
                line: #line,
                manifest_dir: ::core::env!("CARGO_MANIFEST_DIR"),
                arguments: &[#(#written),*],
                should_panic: #should_panic,
                runtime: #runtime_name,
            };
            #runtime::__private::run(&__YING_LEAK_TEST, #body)
        }
    }
}
