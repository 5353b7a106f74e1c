//! Procedural macros of ying. Depend on `ying-runtime` and use them through it (`ying::leak_test`); this crate
//! holds the compile-time half only.
//!
//! The attribute goes through three steps, each in its own module: [`args`] parses the arguments keeping every
//! value with its span, [`validate`] checks them against the one table of the attribute's arguments
//! ([`ying_report::arguments::ARGUMENTS`]: unknown, duplicate and mistyped keys, limits, sizes and their units, an
//! argument written without the one it needs) into a [`validate::LeakTestArgs`], and [`expand`] writes the test,
//! which carries the arguments as written for the runtime to resolve through the same table. On an error the
//! function is still emitted, with the error beside it, so that one mistake does not bury the rest of the crate
//! under follow-on errors. [`source`] reads the function back from its file for the one thing its input cannot
//! tell: a `#[test]` written before the leak test, which has already registered the test.

mod args;
mod expand;
mod source;
mod validate;

use proc_macro::TokenStream;

/// Marks a test as a leak test: its body runs in a measured scope and the test fails when it exceeds its
/// budgets. See `ying::leak_test` in the `ying-runtime` crate for the documentation.
#[proc_macro_attribute]
pub fn leak_test(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let function = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let message = format!("`#[ying::leak_test]` goes on a test function: {error}");
            let mut output = syn::Error::new(error.span(), message).into_compile_error();
            output.extend(item);
            return output.into();
        }
    };
    let raw_args = proc_macro2::TokenStream::from(args);
    let checked = args::parse(raw_args.clone()).and_then(|args| validate::validate(args, &function));
    match checked {
        Ok(args) if function.sig.asyncness.is_some() => {
            expand::defer_to_async_attribute(raw_args, &args.runtime, function).into()
        }
        Ok(args) => {
            let registered = function.attrs.iter().any(args::is_test_attribute)
                || source::has_test_attribute(&function).unwrap_or(false);
            expand::expand(&args, function, registered).into()
        }
        Err(error) => {
            // The function stays, for its other errors; without its test attribute, whose own errors (a test
            // with arguments) would repeat these on the attribute's span.
            let mut output = error.into_compile_error();
            let mut function = function;
            function.attrs.retain(|attr| !args::is_test_attribute(attr));
            output.extend(quote::ToTokens::into_token_stream(function));
            output.into()
        }
    }
}
