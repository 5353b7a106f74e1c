//! The workspace a command works in: its metadata, its configuration (`[workspace.metadata.ying]`), and where its
//! outputs and baseline go. Shared by every command.
//!
//! Most commands read it with `cargo metadata` ([`Workspace::open`]). Those that work from what a nextest run left
//! (`cargo ying gate`, and the wrapper each test runs in) may be where cargo cannot read it: a workspace remapped
//! under a run of a nextest archive holds its manifest, not its sources. They read its [`Place`] from its Cargo.toml
//! alone.

use crate::config::Config;
use crate::error::{ConfigError, Error, ManifestError, Result};
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
        let mut root_package = None;
        for package in &metadata.packages {
            let at = package.manifest_path.as_std_path();
            if at == manifest {
                root_package = Some(&package.metadata);
            } else if has_ying(&package.metadata) {
                // A member's table would be read by nobody: say so rather than run without it.
                return Err(Error::Config {
                    manifest: at.to_owned(),
                    table: PACKAGE_TABLE,
                    source: ConfigError {
                        key: None,
                        message: format!(
                            "cargo ying is configured for the whole workspace: move these settings to \
                             [workspace.metadata.ying] in {}",
                            manifest.display()
                        ),
                    },
                });
            }
        }
        let config = read_config(&manifest, &metadata.workspace_metadata, root_package)?;
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

/// The table a workspace is configured in.
const WORKSPACE_TABLE: &str = "[workspace.metadata.ying]";

/// The table a workspace of one package may be configured in instead.
const PACKAGE_TABLE: &str = "[package.metadata.ying]";

/// Whether a `metadata` table has a `ying` table (or anything under that key).
fn has_ying(metadata: &serde_json::Value) -> bool {
    metadata.get("ying").is_some_and(|value| !value.is_null())
}

/// The configuration in the root manifest `manifest`: its `[workspace.metadata.ying]` (`workspace`, the
/// `metadata` table) or, in a workspace whose root is a package, that package's `[package.metadata.ying]`
/// (`package`), read alike; both set is refused, as only one would be read.
fn read_config(manifest: &Path, workspace: &serde_json::Value, package: Option<&serde_json::Value>) -> Result<Config> {
    let error = |table, source| Error::Config { manifest: manifest.to_owned(), table, source };
    match package.filter(|package| has_ying(package)) {
        None => Config::from_metadata(workspace).map_err(|source| error(WORKSPACE_TABLE, source)),
        Some(_) if has_ying(workspace) => Err(error(
            PACKAGE_TABLE,
            ConfigError {
                key: None,
                message: format!("{WORKSPACE_TABLE} is set too, and cargo ying reads one: keep that one"),
            },
        )),
        Some(package) => Config::from_metadata(package).map_err(|source| error(PACKAGE_TABLE, source)),
    }
}

impl Place {
    /// The workspace whose root is `root`, read from its Cargo.toml without cargo: its configuration from
    /// `[workspace.metadata.ying]`, its target directory from `CARGO_TARGET_DIR` (relative to the root), else
    /// `target` under the root.
    pub(crate) fn read(root: &Path) -> Result<Self> {
        let manifest = root.join("Cargo.toml");
        let error = |source| Error::Manifest { path: manifest.clone(), source };
        let text = ying_report::read_text(&manifest).map_err(|why| error(ManifestError::Io(why.into())))?;
        let table: toml::Table = text.parse().map_err(|why| error(ManifestError::Toml(why)))?;
        let metadata_of = |section: &str| {
            table
                .get(section)
                .and_then(|section| section.get("metadata"))
                .and_then(|metadata| serde_json::to_value(metadata).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        let package = metadata_of("package");
        let config = read_config(&manifest, &metadata_of("workspace"), Some(&package))?;
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
    fn a_crate_of_one_package_is_configured_in_its_package_table_checked_as_the_workspaces() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| std::fs::write(dir.path().join("Cargo.toml"), text).unwrap();
        let package = "[package]\nname = \"p\"\nversion = \"0.1.0\"\n";
        write(&format!("{package}[package.metadata.ying]\nbaseline = \"mem.json\"\n"));
        assert_eq!(Place::read(dir.path()).unwrap().baseline_path(None), dir.path().join("mem.json"));
        write(&format!("{package}[package.metadata.ying]\nbasline = \"mem.json\"\n"));
        let error = Place::read(dir.path()).unwrap_err().chain();
        assert!(error.starts_with("failed to read [package.metadata.ying] in "), "{error}");
        assert!(error.contains("unknown field `basline`; did you mean `baseline`?"), "{error}");
        write(&format!("{package}[package.metadata.ying]\nreruns = \"two\"\n"));
        assert!(Place::read(dir.path()).unwrap_err().chain().contains("`reruns`"));
        write(&format!("[workspace.metadata.ying]\nreruns = 1\n{package}[package.metadata.ying]\nreruns = 2\n"));
        let error = Place::read(dir.path()).unwrap_err().chain();
        assert!(error.contains("[workspace.metadata.ying] is set too, and cargo ying reads one"), "{error}");
    }

    #[test]
    fn a_members_package_table_is_refused_naming_where_its_settings_go() {
        let dir = tempfile::tempdir().unwrap();
        let member = dir.path().join("m");
        std::fs::create_dir_all(member.join("src")).unwrap();
        std::fs::write(member.join("src/lib.rs"), "").unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\nmembers = [\"m\"]\nresolver = \"2\"\n").unwrap();
        let package = "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
        std::fs::write(member.join("Cargo.toml"), format!("{package}[package.metadata.ying]\nretries = 1\n")).unwrap();
        let manifest = dir.path().join("Cargo.toml");
        let error = super::Workspace::open(Some(&manifest), &[]).err().expect("refused").chain();
        assert!(error.starts_with("failed to read [package.metadata.ying] in "), "{error}");
        assert!(error.contains("move these settings to [workspace.metadata.ying] in"), "{error}");
        std::fs::write(member.join("Cargo.toml"), package).unwrap();
        assert!(super::Workspace::open(Some(&manifest), &[]).is_ok());
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
