//! The workspace a command works in: its metadata, its configuration (`[workspace.metadata.ying]`), and where its
//! outputs and baseline go. Shared by every command.

use crate::config::Config;
use crate::error::{Error, Result};
use cargo_metadata::{Metadata, MetadataCommand};
use std::path::{Path, PathBuf};

/// A workspace, read once.
pub(crate) struct Workspace {
    /// `cargo metadata` of the workspace.
    pub metadata: Metadata,
    /// Its configuration.
    pub config: Config,
}

impl Workspace {
    /// Reads the workspace whose manifest is `manifest_path` (the current one when `None`) and its configuration;
    /// `lock_flags`: `--locked`, `--offline`, `--frozen` as the command line gave them.
    pub(crate) fn open(manifest_path: Option<&Path>, lock_flags: &[&str]) -> Result<Self> {
        let mut command = MetadataCommand::new();
        command.no_deps();
        if let Some(path) = manifest_path {
            command.manifest_path(path);
        }
        command.other_options(lock_flags.iter().map(|flag| (*flag).to_owned()).collect::<Vec<_>>());
        let metadata = command.exec().map_err(Error::Metadata)?;
        let manifest = metadata.workspace_root.join("Cargo.toml").into_std_path_buf();
        let config =
            Config::from_metadata(&metadata.workspace_metadata).map_err(|source| Error::Config { manifest, source })?;
        Ok(Self { metadata, config })
    }

    /// The workspace's root directory.
    pub(crate) fn root(&self) -> &Path {
        self.metadata.workspace_root.as_std_path()
    }

    /// Where `cargo ying` writes a run's files: `<target-dir>/ying`, the target directory being `target_dir` when
    /// given.
    pub(crate) fn out_dir(&self, target_dir: Option<&Path>) -> PathBuf {
        target_dir
            .map_or_else(|| self.metadata.target_directory.clone().into_std_path_buf(), Path::to_owned)
            .join("ying")
    }

    /// The baseline file: the flag, else the configuration (relative to the workspace root), else the default.
    pub(crate) fn baseline_path(&self, flag: Option<&Path>) -> PathBuf {
        match (flag, &self.config.baseline) {
            (Some(path), _) => path.to_owned(),
            (None, Some(configured)) => self.root().join(configured),
            (None, None) => self.root().join(ying_report::DEFAULT_BASELINE),
        }
    }
}
