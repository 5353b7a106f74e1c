//! The `cargo-ying` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    cargo_ying::main_impl()
}
