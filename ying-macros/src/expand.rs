//! Expansion: the test function, its body run by `ying`'s leak-test runner. Generated code names everything by
//! absolute path (`::core::...`, the runtime through `::ying::__private`).

use crate::args::is_test_attribute;
use crate::validate::{Attribution, LeakTestArgs};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{ItemFn, ReturnType};

fn option(value: Option<u64>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// Re-emits an `async fn` test below its async test attribute: `#[tokio::test]` (or the like) expands first into
/// the synchronous test that builds the runtime, and the leak test then wraps all of it, whichever order the two
/// attributes were written in.
pub(crate) fn defer_to_async_attribute(raw_args: TokenStream, function: ItemFn) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    quote! {
        #(#attrs)*
        #[::ying::leak_test(#raw_args)]
        #vis #sig #block
    }
}

/// Writes the leak test.
pub(crate) fn expand(args: &LeakTestArgs, function: ItemFn) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    let name = sig.ident.to_string();
    let line = quote_spanned!(sig.ident.span()=> ::core::line!());
    let needs_test_attribute = !attrs.iter().any(is_test_attribute);
    let test_attribute = needs_test_attribute.then(|| quote!(#[::core::prelude::v1::test]));

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

    let output = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    quote! {
        #test_attribute
        #(#attrs)*
        #vis #sig {
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
            ::ying::__private::run(&__YING_LEAK_TEST, || -> #output #block)
        }
    }
}
