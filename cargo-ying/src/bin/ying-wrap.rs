//! The `ying-wrap` binary: nextest's wrapper of the profile `ying`; everything lives in the library.

fn main() -> std::process::ExitCode {
    cargo_ying::wrap_impl()
}
