//! Expansion: the test function, its body run by `ying`'s leak-test runner. Generated code names everything by
//! absolute path (`::core::...`, the runtime through `::ying::__private`).

use crate::validate::{Attribution, LeakTestArgs};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{ItemFn, ReturnType};

/// Attributes that already make the function a test: `#[test]`, `#[tokio::test]`, and the marker the built-in
/// `#[test]` leaves when it expanded first.
fn is_test_attribute(attr: &syn::Attribute) -> bool {
    let last = attr.path().segments.last().map(|segment| segment.ident.to_string());
    matches!(last.as_deref(), Some("test" | "rustc_test_marker"))
}

fn option(value: Option<u64>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
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
    let run = if sig.asyncness.is_some() {
        quote! {
            ::ying::__private::run_async(&__YING_LEAK_TEST, || {
                ::std::boxed::Box::pin(async move #block)
                    as ::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = #output>>>
            })
            .await
        }
    } else {
        quote! {
            ::ying::__private::run(&__YING_LEAK_TEST, || -> #output #block)
        }
    };

    quote! {
        #test_attribute
        #(#attrs)*
        #vis #sig {
            static __YING_LEAK_TEST: ::ying::__private::LeakTest = ::ying::__private::LeakTest {
                package: ::core::env!("CARGO_PKG_NAME"),
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
            #run
        }
    }
}
