//! Reading scenario and manifest files from disk: files or directories of
//! `*.yaml`/`*.yml` in, [`Loaded`] documents out (parsed by the core's
//! `model::load`). The one place the simulator and the CLI read manifests
//! from the file system; it interprets nothing.

use std::fs;
use std::path::{Path, PathBuf};

use arbiter_core::model::load::{load_str, LoadError, Loaded};

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
            let text = fs::read_to_string(&file).map_err(|source| LoadError::Io {
                path: file.clone(),
                error: source,
            })?;
            loaded.extend(load_str(&text, &file)?);
        }
    }
    Ok(loaded)
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
}
