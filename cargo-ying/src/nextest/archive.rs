//! The test binaries a nextest archive holds (`cargo nextest archive`, a zstd-compressed tar), read from the
//! `target/nextest/binaries-metadata.json` in it, for `cargo ying gate --archive-file`: a binary of the archive that
//! nextest did not list in the run, and the tests of the baseline in it, are missing from the run.
//!
//! The archive is read as a stream, once, up to the metadata; the metadata's size is bounded.
//!
//! Where an archive's tests run, the cargo metadata it carries (`target/nextest/cargo-metadata.json`, extracted
//! beside the binaries) says where each package was when they were built ([`built_package_dir`]): the binaries'
//! debug information names the package's files there, whatever `--workspace-remap` says now.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Where nextest puts the metadata in an archive.
const METADATA: &str = "target/nextest/binaries-metadata.json";
/// The largest metadata read: far more than any workspace's binaries take.
const METADATA_MAX: u64 = 64 << 20;
/// A tar block.
const BLOCK: usize = 512;

/// Where nextest extracts the cargo metadata of an archive, under the target directory.
const CARGO_METADATA: &str = "nextest/cargo-metadata.json";

/// How many directories above a test binary its target directory may be (`<target>/<triple>/debug/deps/`).
const LEVELS: usize = 5;

/// Where package `package` was built, for a `binary` extracted from an archive whose cargo metadata lies in its
/// target directory (`<target>/nextest/cargo-metadata.json`, at most [`LEVELS`] above it): the directory of that
/// package's manifest as the metadata names it. `None` for a binary not from an archive, or metadata that does
/// not read or does not name the package.
pub(crate) fn built_package_dir(binary: &Path, package: &str) -> Option<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        packages: Vec<Package>,
        workspace_members: Vec<String>,
    }
    #[derive(serde::Deserialize)]
    struct Package {
        name: String,
        id: String,
        manifest_path: PathBuf,
    }
    let path =
        binary.ancestors().skip(1).take(LEVELS).map(|dir| dir.join(CARGO_METADATA)).find(|path| path.is_file())?;
    let text = ying_report::read_bounded(&path, METADATA_MAX).ok()?;
    let metadata: Metadata = serde_json::from_slice(&text).ok()?;
    let package = metadata
        .packages
        .into_iter()
        .find(|candidate| candidate.name == package && metadata.workspace_members.contains(&candidate.id))?;
    package.manifest_path.parent().map(Path::to_owned)
}

/// A test binary of the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArchivedBinary {
    /// nextest's id of it (`pkg`, `pkg::name`, `pkg::kind/name`).
    pub binary_id: String,
    /// Its path where the archive was made, whose file name names a library's crate.
    pub binary: PathBuf,
}

/// The test binaries of the archive at `path`; the error says why it is not a nextest archive that reads.
pub(crate) fn binaries(path: &Path) -> Result<Vec<ArchivedBinary>, String> {
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
        .map_err(|error| format!("it is not zstd-compressed, as `cargo nextest archive` makes it: {error}"))?;
    let metadata = find(decoder, METADATA)?.ok_or_else(|| format!("it holds no {METADATA}"))?;
    parse(&metadata)
}

/// The binaries named in `binaries-metadata.json`.
fn parse(text: &[u8]) -> Result<Vec<ArchivedBinary>, String> {
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(rename = "rust-binaries")]
        rust_binaries: std::collections::BTreeMap<String, Binary>,
    }
    #[derive(serde::Deserialize)]
    struct Binary {
        #[serde(rename = "binary-id")]
        binary_id: String,
        #[serde(rename = "binary-path")]
        binary_path: PathBuf,
    }
    let metadata: Metadata =
        serde_json::from_slice(text).map_err(|error| format!("its {METADATA} does not read: {error}"))?;
    Ok(metadata
        .rust_binaries
        .into_values()
        .map(|binary| ArchivedBinary { binary_id: binary.binary_id, binary: binary.binary_path })
        .collect())
}

/// The contents of the file `wanted` in the tar stream `tar`, if it holds one.
fn find(mut tar: impl Read, wanted: &str) -> Result<Option<Vec<u8>>, String> {
    let broken = |error: std::io::Error| format!("it is cut short or not a tar: {error}");
    let mut header = [0_u8; BLOCK];
    // A GNU long name (`L` entry) names the entry after it.
    let mut long_name: Option<String> = None;
    loop {
        match read_block(&mut tar, &mut header).map_err(broken)? {
            false => return Ok(None),
            true if header.iter().all(|byte| *byte == 0) => return Ok(None),
            true => {}
        }
        let size = octal(&header[124..136]).ok_or("it is not a tar: an entry's size does not read")?;
        let padded = size.div_ceil(BLOCK as u64) * BLOCK as u64;
        let name = long_name.take().unwrap_or_else(|| {
            let field = |bytes: &[u8]| {
                let end = bytes.iter().position(|byte| *byte == 0).unwrap_or(bytes.len());
                String::from_utf8_lossy(&bytes[..end]).into_owned()
            };
            let (prefix, name) = (field(&header[345..500]), field(&header[..100]));
            if prefix.is_empty() { name } else { format!("{prefix}/{name}") }
        });
        match header[156] {
            b'L' if size <= 4096 => {
                let mut text = vec![0; usize::try_from(padded).unwrap_or(0)];
                tar.read_exact(&mut text).map_err(broken)?;
                text.truncate(usize::try_from(size).unwrap_or(0));
                long_name = Some(String::from_utf8_lossy(&text).trim_end_matches('\0').to_owned());
            }
            b'0' | 0 if name.trim_start_matches("./") == wanted => {
                if size > METADATA_MAX {
                    return Err(format!("its {wanted} is {size} bytes, more than a metadata file can be"));
                }
                let mut contents = Vec::new();
                tar.by_ref().take(size).read_to_end(&mut contents).map_err(broken)?;
                if (contents.len() as u64) < size {
                    return Err(broken(std::io::ErrorKind::UnexpectedEof.into()));
                }
                return Ok(Some(contents));
            }
            _ => {
                std::io::copy(&mut tar.by_ref().take(padded), &mut std::io::sink()).map_err(broken)?;
            }
        }
    }
}

/// Fills `block` from `reader`; `false` at the stream's end before the block's first byte.
fn read_block(reader: &mut impl Read, block: &mut [u8; BLOCK]) -> std::io::Result<bool> {
    let mut filled = 0;
    while filled < BLOCK {
        match reader.read(&mut block[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(true)
}

/// A tar header's octal number field.
fn octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

#[cfg(test)]
mod tests {
    use super::{BLOCK, built_package_dir, find, parse};
    use std::path::Path;

    #[test]
    fn an_extracted_archives_binary_names_where_its_package_was_built() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir_all(target.join("nextest")).unwrap();
        std::fs::create_dir_all(target.join("debug/deps")).unwrap();
        let binary = target.join("debug/deps/plain-0123");
        std::fs::write(&binary, "").unwrap();
        assert_eq!(built_package_dir(&binary, "app"), None, "not from an archive");
        let metadata = r#"{"workspace_members": ["path+file:///build/ws/app#0.1.0"], "packages": [
            {"name": "dep", "id": "registry+dep", "manifest_path": "/home/.cargo/dep/Cargo.toml"},
            {"name": "app", "id": "path+file:///build/ws/app#0.1.0", "manifest_path": "/build/ws/app/Cargo.toml"}]}"#;
        std::fs::write(target.join("nextest/cargo-metadata.json"), metadata).unwrap();
        assert_eq!(built_package_dir(&binary, "app").as_deref(), Some(Path::new("/build/ws/app")));
        assert_eq!(built_package_dir(&binary, "dep"), None, "a dependency is no package of the workspace");
        std::fs::write(target.join("nextest/cargo-metadata.json"), "{").unwrap();
        assert_eq!(built_package_dir(&binary, "app"), None, "metadata that does not read");
    }

    /// A tar entry of `name` holding `contents`, as tar writes one (`typeflag` `0`).
    fn entry(name: &str, contents: &[u8], typeflag: u8) -> Vec<u8> {
        let mut header = [0_u8; BLOCK];
        header[..name.len()].copy_from_slice(name.as_bytes());
        header[124..135].copy_from_slice(format!("{:011o}", contents.len()).as_bytes());
        header[156] = typeflag;
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(contents);
        bytes.resize(bytes.len().div_ceil(BLOCK) * BLOCK, 0);
        bytes
    }

    #[test]
    fn the_metadata_is_found_after_other_entries_and_under_a_long_name() {
        let metadata = br#"{"rust-binaries":{"p::t":{"binary-id":"p::t","binary-path":"/b/debug/deps/t-0a1b"}}}"#;
        let mut tar = entry("target/debug/deps/t-0a1b", &[7; 700], b'0');
        tar.extend(entry("target/nextest/binaries-metadata.json", metadata, b'0'));
        tar.extend([0; 2 * BLOCK]);
        assert_eq!(find(&tar[..], "target/nextest/binaries-metadata.json").unwrap().unwrap(), metadata);
        let binaries = parse(metadata).unwrap();
        assert_eq!(
            (binaries[0].binary_id.as_str(), binaries[0].binary.as_path()),
            ("p::t", Path::new("/b/debug/deps/t-0a1b"))
        );

        let long = format!("target/{}/x", "d".repeat(120));
        let mut tar = entry("././@LongLink", long.as_bytes(), b'L');
        tar.extend(entry("target/ddd", b"{}", b'0'));
        assert_eq!(find(&tar[..], &long).unwrap().unwrap(), b"{}");
        assert_eq!(find(&tar[..], "target/ddd").unwrap(), None, "the long name names the entry after it");
    }

    #[test]
    fn a_tar_cut_short_is_an_error_and_one_without_the_file_has_none() {
        let tar = entry("target/nextest/binaries-metadata.json", b"{\"rust-binaries\":{}}", b'0');
        assert!(find(&tar[..520], "target/nextest/binaries-metadata.json").is_err());
        assert_eq!(find(&tar[..], "other").unwrap(), None);
        assert!(parse(b"{").is_err());
    }
}
