//! `[workspace.metadata.ying]`: defaults for `cargo ying`, overridden by flags.

use crate::error::{Error, Result};
use std::time::Duration;

/// The configuration table, as written in the workspace's Cargo.toml.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Tests run at once.
    pub jobs: Option<usize>,
    /// Per-test timeout, as `--timeout` takes it (`"90s"`).
    pub timeout: Option<String>,
    /// Stop scheduling tests after the first failure.
    pub fail_fast: Option<bool>,
    /// The baseline file, relative to the workspace root.
    pub baseline: Option<String>,
    /// Tolerated relative growth of retained memory (`"10%"`).
    pub max_growth: Option<String>,
    /// Tolerated absolute growth of retained memory (`"1 KiB"`).
    pub min_growth: Option<String>,
    /// Figures gated besides retained bytes (`["peak", "allocations"]`).
    pub gate: Option<Vec<crate::gate::Figure>>,
}

impl Config {
    /// Reads the table from the workspace metadata (`null` when absent). `manifest` names the file in errors.
    pub fn from_metadata(metadata: &serde_json::Value, manifest: &std::path::Path) -> Result<Self> {
        let action = || format!("read [workspace.metadata.ying] in {}", manifest.display());
        let table = match metadata.get("ying") {
            None | Some(serde_json::Value::Null) => return Ok(Self::default()),
            Some(table) => table,
        };
        let config: Self = serde_json::from_value(table.clone()).map_err(|error| Error::new(action(), error))?;
        if let Some(timeout) = &config.timeout {
            crate::cli::parse_duration(timeout).map_err(|why| Error::new(action(), format!("`timeout`: {why}")))?;
        }
        if let Some(growth) = &config.max_growth {
            crate::gate::parse_percent(growth).map_err(|why| Error::new(action(), format!("`max-growth`: {why}")))?;
        }
        if let Some(growth) = &config.min_growth {
            crate::gate::parse_size(growth).map_err(|why| Error::new(action(), format!("`min-growth`: {why}")))?;
        }
        if config.jobs == Some(0) {
            return Err(Error::new(action(), "`jobs` must be at least 1"));
        }
        Ok(config)
    }

    /// The tolerance of the gate: flags first, then this configuration, then the defaults.
    pub fn tolerance(&self, max_growth: Option<f64>, min_growth: Option<u64>) -> crate::gate::Tolerance {
        let defaults = crate::gate::Tolerance::default();
        crate::gate::Tolerance {
            relative: max_growth
                .or_else(|| self.max_growth.as_deref().and_then(|g| crate::gate::parse_percent(g).ok()))
                .unwrap_or(defaults.relative),
            absolute: min_growth
                .or_else(|| self.min_growth.as_deref().and_then(|g| crate::gate::parse_size(g).ok()))
                .unwrap_or(defaults.absolute),
        }
    }

    /// The figures gated besides retained bytes: the flags when given, else the configuration.
    pub fn gates(&self, flags: &[crate::gate::Figure]) -> Vec<crate::gate::Figure> {
        if flags.is_empty() { self.gate.clone().unwrap_or_default() } else { flags.to_vec() }
    }

    /// The timeout, if configured (validated when read).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout.as_deref().and_then(|timeout| crate::cli::parse_duration(timeout).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::Config;
    use serde_json::json;
    use std::path::Path;
    use std::time::Duration;

    #[test]
    fn reads_known_keys() {
        let config =
            Config::from_metadata(&json!({"ying": {"jobs": 3, "timeout": "90s", "fail-fast": false}}), Path::new("C"))
                .unwrap();
        assert_eq!(config.jobs, Some(3));
        assert_eq!(config.timeout(), Some(Duration::from_secs(90)));
        assert_eq!(config.fail_fast, Some(false));
        assert!(Config::from_metadata(&json!(null), Path::new("C")).unwrap().jobs.is_none());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_them() {
        let error = Config::from_metadata(&json!({"ying": {"jbos": 3}}), Path::new("/w/Cargo.toml")).unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("failed to read [workspace.metadata.ying] in /w/Cargo.toml"), "{message}");
        assert!(message.contains("unknown field `jbos`"), "{message}");
        let error = Config::from_metadata(&json!({"ying": {"timeout": "soon"}}), Path::new("C")).unwrap_err();
        assert!(error.to_string().contains("`timeout`: `soon` is not a duration"), "{error}");
    }
}
