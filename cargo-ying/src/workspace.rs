//! The workspace a command works in: its metadata, its configuration (`[workspace.metadata.ying]`), and where its
//! outputs and baseline go. Shared by every command.
//!
//! Most commands read it with `cargo metadata` ([`Workspace::open`]). Those that work from what a nextest run left
//! (`cargo ying gate`, and the wrapper each test runs in) may be where cargo cannot read it: a workspace remapped
//! under a run of a nextest archive holds its manifest, not its sources. They read its [`Place`] from its Cargo.toml
//! alone.

use crate::config::Config;
use crate::error::{Error, ManifestError, Result};
use cargo_metadata::{Metadata, MetadataCommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a workspace is, where its outputs go and how it is configured.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    /// The root directory.
    pub root: PathBuf,
    /// The target directory.
    pub target_directory: PathBuf,
    /// Its configuration.
    pub config: Config,
}

/// A workspace, read once.
pub(crate) struct Workspace {
    /// `cargo metadata` of the workspace.
    pub metadata: Metadata,
    /// Where it is, and its configuration.
    pub place: Place,
}

impl Workspace {
    /// The directory of each of the workspace's packages, by name: what its reports' source paths are relative to.
    pub(crate) fn package_dirs(&self) -> BTreeMap<String, PathBuf> {
        self.metadata
            .packages
            .iter()
            .filter_map(|package| {
                let dir = package.manifest_path.parent()?;
                Some((package.name.to_string(), dir.as_std_path().to_owned()))
            })
            .collect()
    }

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
        let place = Place {
            root: metadata.workspace_root.clone().into_std_path_buf(),
            target_directory: metadata.target_directory.clone().into_std_path_buf(),
            config,
        };
        Ok(Self { metadata, place })
    }

    /// The workspace's root directory.
    pub(crate) fn root(&self) -> &Path {
        &self.place.root
    }

    /// Where `cargo ying` writes a run's files: `<target-dir>/ying`, the target directory being `target_dir` when
    /// given.
    pub(crate) fn out_dir(&self, target_dir: Option<&Path>) -> PathBuf {
        self.place.out_dir(target_dir)
    }

    /// The baseline file: the flag, else the configuration (relative to the workspace root), else the default.
    pub(crate) fn baseline_path(&self, flag: Option<&Path>) -> PathBuf {
        self.place.baseline_path(flag)
    }
}

impl Place {
    /// The workspace whose root is `root`, read from its Cargo.toml without cargo: its configuration from
    /// `[workspace.metadata.ying]`, its target directory from `CARGO_TARGET_DIR` (relative to the root), else
    /// `target` under the root.
    pub(crate) fn read(root: &Path) -> Result<Self> {
        let manifest = root.join("Cargo.toml");
        let error = |source| Error::Manifest { path: manifest.clone(), source };
        let text = std::fs::read_to_string(&manifest).map_err(|why| error(ManifestError::Io(why)))?;
        let table: toml::Table = text.parse().map_err(|why| error(ManifestError::Toml(why)))?;
        let metadata = table
            .get("workspace")
            .and_then(|workspace| workspace.get("metadata"))
            .and_then(|metadata| serde_json::to_value(metadata).ok())
            .unwrap_or(serde_json::Value::Null);
        let config =
            Config::from_metadata(&metadata).map_err(|source| Error::Config { manifest: manifest.clone(), source })?;
        let target_directory = match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
            Some(dir) => root.join(dir),
            None => root.join("target"),
        };
        Ok(Self { root: root.to_owned(), target_directory, config })
    }

    /// `<target-dir>/ying`, the target directory being `target_dir` when given.
    pub(crate) fn out_dir(&self, target_dir: Option<&Path>) -> PathBuf {
        target_dir.unwrap_or(&self.target_directory).join("ying")
    }

    /// Refuses `run`, which ran the tests of the workspace at `ran_in`, when that is another workspace than this
    /// one: two workspaces that share a target directory share its `ying/`, and the last run there may be the
    /// other's. A run that did not record its workspace (`None`, written by an earlier cargo ying) is let through.
    pub(crate) fn check_own(&self, run: &str, ran_in: Option<&str>) -> Result<()> {
        let Some(ran_in) = ran_in else { return Ok(()) };
        let same = |a: &Path, b: &Path| a == b || std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok();
        if same(Path::new(ran_in), &self.root) {
            return Ok(());
        }
        Err(Error::ForeignRun { run: run.to_owned(), ran_in: PathBuf::from(ran_in), root: self.root.clone() })
    }

    /// The baseline file: the flag, else the configuration (relative to the workspace root), else the default.
    pub(crate) fn baseline_path(&self, flag: Option<&Path>) -> PathBuf {
        match (flag, &self.config.baseline) {
            (Some(path), _) => path.to_owned(),
            (None, Some(configured)) => self.root.join(configured),
            (None, None) => self.root.join(ying_report::DEFAULT_BASELINE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Place;

    #[test]
    fn a_place_is_read_from_the_manifest_alone() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = "[workspace]\n[workspace.metadata.ying]\nbaseline = \"leaks.json\"\nallow = [\"a::b\"]\n\n\
                        [package]\nname = \"p\"\nversion = \"0.1.0\"\n";
        std::fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
        let place = Place::read(dir.path()).unwrap();
        assert_eq!(place.baseline_path(None), dir.path().join("leaks.json"));
        assert_eq!(place.config.allow.as_deref(), Some(&["a::b".to_owned()][..]));
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace.metadata.ying]\nretries = \"x\"\n").unwrap();
        let error = Place::read(dir.path()).unwrap_err().chain();
        assert!(error.contains("Cargo.toml") && error.contains("retries"), "{error}");
    }

    #[test]
    #[cfg(unix)]
    fn a_run_of_this_workspace_is_taken_under_any_of_its_names_and_another_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        let place = Place::read(dir.path()).unwrap();
        let root = dir.path().display().to_string();
        assert!(place.check_own("run", Some(&root)).is_ok());
        assert!(place.check_own("run", None).is_ok(), "an earlier cargo ying's run names no workspace");
        let link = tempfile::tempdir().unwrap();
        let linked = link.path().join("ws");
        std::os::unix::fs::symlink(dir.path(), &linked).unwrap();
        assert!(place.check_own("run", Some(&linked.display().to_string())).is_ok(), "the same through a link");
        let other = link.path().display().to_string();
        let error = place.check_own("nextest run 1", Some(&other)).unwrap_err().chain();
        assert!(error.starts_with("failed to take nextest run 1 as this workspace's"), "{error}");
        assert!(error.contains(&format!("workspace at {other}, not of this one at {root}")), "{error}");
    }
}
