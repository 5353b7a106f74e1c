//! Expansion: the test function, its body run by `ying`'s leak-test runner. Generated code names everything by
//! absolute path (`::core::...`, the runtime through `::ying::__private`).

use crate::validate::{Attribution, LeakTestArgs};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::{AttrStyle, ItemFn, ReturnType, Type, parse_quote};

fn option(value: Option<u64>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// Re-emits an `async fn` test below its async test attribute: `#[tokio::test]` (or the like) expands first into
/// the synchronous test that builds the runtime, and the leak test then wraps all of it, whichever order the two
/// attributes were written in.
pub(crate) fn defer_to_async_attribute(raw_args: TokenStream, mut function: ItemFn) -> TokenStream {
    // After the other outer attributes; inner ones (`#![allow(..)]`) stay at the start of the body.
    function.attrs.push(parse_quote!(#[::ying::leak_test(#raw_args)]));
    function.into_token_stream()
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

    let budgets = [
        ("max_retained", args.max_retained),
        ("max_peak", args.max_peak),
        ("max_allocated", args.max_allocated),
        ("max_allocations", args.max_allocations),
        ("max_growth_per_iteration", args.max_growth_per_iteration),
    ]
    .map(|(field, value)| {
        let field = syn::Ident::new(field, proc_macro2::Span::call_site());
        let value = option(value);
        quote!(#field: #value)
    });
    let warmup = args.warmup;
    let iterations = match args.iterations {
        Some(iterations) => quote!(::core::option::Option::Some(#iterations)),
        None => quote!(::core::option::Option::None),
    };
    let attribution = match args.attribution {
        Some(Attribution::Thread) => quote!(::core::option::Option::Some(::ying::__private::Attribution::Thread)),
        Some(Attribution::Process) => quote!(::core::option::Option::Some(::ying::__private::Attribution::Process)),
        None => quote!(::core::option::Option::None),
    };
    let allow = &args.allow;
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
            static __YING_LEAK_TEST: ::ying::__private::LeakTest = ::ying::__private::LeakTest {
                package: ::core::env!("CARGO_PKG_NAME"),
                bin_name: ::core::option_env!("CARGO_BIN_NAME"),
                module_path: ::core::module_path!(),
                name: #name,
                file: ::core::file!(),
                line: #line,
                manifest_dir: ::core::env!("CARGO_MANIFEST_DIR"),
                budgets: ::ying::__private::Budgets { #(#budgets),* },
                warmup: #warmup,
                iterations: #iterations,
                attribution: #attribution,
                allow: &[#(#allow),*],
                should_panic: #should_panic,
            };
            ::ying::__private::run(&__YING_LEAK_TEST, #body)
        }
    }
}
