//! `cargo ying setup nextest`: adds the profile `ying` to `.config/nextest.toml` (see `nextest::profile`), and makes
//! the allocation interposer ready, as the wrapper then finds it (`run::exec::interposer::library`).

use crate::cli::SetupNextestArgs;
use crate::error::{Error, Result};
use crate::nextest::profile::{self, Change};
use crate::run::exec::interposer;
use crate::workspace::Workspace;
use ying_report::exit_code;

/// Runs `cargo ying setup nextest`; returns the exit code.
pub(crate) fn nextest(args: &SetupNextestArgs) -> Result<u8> {
    // SIGINT and SIGTERM stop the build whole (see `run::process::stop_on_interrupt`).
    crate::signals::catch();
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let path = workspace.root().join(".config").join("nextest.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(Error::io("read", &path)(error)),
    };
    let change = profile::apply(&text).map_err(|source| Error::NextestConfig { path: path.clone(), source })?;
    if args.print {
        print!("{}", if let Change::Added(text) = &change { text } else { &text });
        return Ok(exit_code::OK);
    }
    // Ready before the file names it: a profile whose tests would all fail for want of it is never written.
    let library = interposer::library()?;
    match change {
        Change::Added(text) => {
            let dir = path.parent().expect("the file is in .config");
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
            // Replaced whole: a run of nextest never reads half of it.
            let partial = dir.join(".nextest.toml.ying");
            std::fs::write(&partial, text).map_err(Error::io("write", &partial))?;
            std::fs::rename(&partial, &path).map_err(Error::io("write", &path))?;
            eprintln!("{:>12} the profile `{}` to {}", "Added", profile::PROFILE, path.display());
        }
        Change::AlreadySet => {
            eprintln!("{:>12} {} has the profile `{}` already", "Fresh", path.display(), profile::PROFILE);
        }
    }
    eprintln!("{:>12} {}", "Interposer", library.display());
    eprintln!(
        "{:>12} `cargo nextest run --profile {}`, then `cargo ying gate` (`--save-baseline` the first time)",
        "Next",
        profile::PROFILE
    );
    Ok(exit_code::OK)
}
