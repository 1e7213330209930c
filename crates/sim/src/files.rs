//! Reading scenario and manifest files from disk: files or directories of
//! `*.yaml`/`*.yml` in, [`Loaded`] documents out (parsed by the core's
//! `model::load`). The one place the simulator and the CLI read manifests
//! from the file system; it interprets nothing. It reads only regular files
//! (symlinks followed; a FIFO, device or socket is refused, also inside a
//! directory), each at most [`MANIFEST_FILE_LIMIT`] bytes, checked before
//! and while reading.

use std::fs;
use std::path::{Path, PathBuf};

use arbiter_core::model::load::{load_str, LoadError, Loaded};
use arbiter_policy::bounded::{self, Refusal};

/// The largest scenario or manifest file read.
pub const MANIFEST_FILE_LIMIT: u64 = 64 << 20;

/// Reads files, or directories (their `*.yaml`/`*.yml` files, recursively,
/// sorted by path), in the order given; document order is kept.
pub fn load_paths(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        let meta = fs::metadata(path).map_err(|source| LoadError::Io {
            path: path.clone(),
            error: source,
        })?;
        let files = if meta.is_dir() {
            let mut files = Vec::new();
            collect_yaml_files(path, &mut files)?;
            if files.is_empty() {
                return Err(LoadError::NoManifests { path: path.clone() });
            }
            files.sort();
            files
        } else {
            vec![path.clone()]
        };
        for file in files {
            let text = read(&file)?;
            loaded.extend(load_str(&text, &file)?);
        }
    }
    Ok(loaded)
}

/// One manifest file as text, if it is a regular file within the cap.
fn read(file: &Path) -> Result<String, LoadError> {
    let bytes = bounded::read(file, MANIFEST_FILE_LIMIT).map_err(|refusal| match refusal {
        Refusal::Io(error) => LoadError::Io {
            path: file.to_path_buf(),
            error,
        },
        Refusal::NotRegular(kind) => LoadError::NotRegularFile {
            path: file.to_path_buf(),
            kind,
        },
        Refusal::TooLarge { size } => LoadError::TooLarge {
            path: file.to_path_buf(),
            size,
            cap: MANIFEST_FILE_LIMIT,
        },
    })?;
    String::from_utf8(bytes).map_err(|_| LoadError::Io {
        path: file.to_path_buf(),
        error: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })
}

fn collect_yaml_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let io = |error| LoadError::Io {
        path: dir.to_path_buf(),
        error,
    };
    for entry in fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let meta = fs::metadata(&path).map_err(|source| LoadError::Io {
            path: path.clone(),
            error: source,
        })?;
        if meta.is_dir() {
            collect_yaml_files(&path, files)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_read_recursively_in_path_order() {
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(err) => panic!("tempdir: {err}"),
        };
        let write = |rel: &str, name: &str| {
            let path = dir.path().join(rel);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            let text = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
            fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        };
        write("b.yaml", "b");
        write("a/z.yml", "az");
        write("a/c.yaml", "ac");
        write("0.yaml", "zero");
        write("notes.txt", "ignored");
        let loaded = match load_paths(&[dir.path().to_path_buf(), dir.path().join("b.yaml")]) {
            Ok(loaded) => loaded,
            Err(err) => panic!("{err}"),
        };
        let names: Vec<&str> = loaded
            .documents
            .iter()
            .filter_map(|d| d.manifest.name())
            .collect();
        assert_eq!(names, vec!["zero", "ac", "az", "b", "b"]);

        let empty = dir.path().join("empty");
        fs::create_dir_all(&empty).unwrap_or_else(|e| panic!("{e}"));
        let err = load_paths(&[empty])
            .map(|_| ())
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("no .yaml or .yml files")));
        let err = load_paths(&[dir.path().join("missing.yaml")])
            .map(|_| ())
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("cannot read") && e.contains("missing.yaml")));
    }

    fn refusal(path: &Path) -> String {
        match load_paths(&[path.to_path_buf()]) {
            Ok(_) => panic!("{} loaded but should not have", path.display()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_device_is_refused_without_reading_it_also_through_a_symlink_in_a_directory() {
        assert_eq!(
            refusal(Path::new("/dev/zero")),
            "/dev/zero: is a character device, not a regular file; pass manifest files or directories of them"
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refusal(dir.path()),
            format!(
                "{}: is a character device, not a regular file; pass manifest files or directories of them",
                link.display()
            )
        );
    }

    #[test]
    fn a_fifo_in_a_scenario_directory_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let fifo = dir.path().join("jobs.yaml");
        match std::process::Command::new("mkfifo").arg(&fifo).status() {
            Ok(status) if status.success() => {}
            other => {
                eprintln!("skipped: mkfifo is not available ({other:?})");
                return;
            }
        }
        assert_eq!(
            refusal(dir.path()),
            format!(
                "{}: is a FIFO, not a regular file; pass manifest files or directories of them",
                fifo.display()
            )
        );
    }

    #[test]
    fn a_file_over_the_cap_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("big.yaml");
        fs::File::create(&file)
            .and_then(|f| f.set_len(MANIFEST_FILE_LIMIT + 1))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refusal(&file),
            format!(
                "{}: is {} bytes, over the cap of {MANIFEST_FILE_LIMIT} bytes for a manifest file; split it into several files in a directory",
                file.display(),
                MANIFEST_FILE_LIMIT + 1
            )
        );
    }
}
