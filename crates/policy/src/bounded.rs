//! Reading one file without being stalled or flooded: only a regular file
//! (symlinks followed), and at most a cap of bytes — checked from metadata
//! before reading and enforced while reading, so a file that grows or lies
//! about its size is still bounded. It never decides which paths are
//! allowed (the bundle loader confines a bundle's files to its directory)
//! and never renders a message: callers turn a [`Refusal`] into their own
//! error naming the file and the fix. Called by `bundle` and the
//! simulator's `files`.

use std::fs::{self, File, FileType, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum Refusal {
    Io(io::Error),
    /// Not a regular file: what it is ("a FIFO", "a character device", ...).
    NotRegular(&'static str),
    /// Over the cap: its size from metadata, or `None` if it grew past the
    /// cap while being read.
    TooLarge {
        size: Option<u64>,
    },
}

/// The bytes of the regular file at `path`, if it holds at most `cap` bytes.
pub fn read(path: &Path, cap: u64) -> Result<Vec<u8>, Refusal> {
    let meta = fs::metadata(path).map_err(Refusal::Io)?;
    regular(meta.file_type())?;
    if meta.len() > cap {
        return Err(Refusal::TooLarge {
            size: Some(meta.len()),
        });
    }
    let file = open(path).map_err(Refusal::Io)?;
    // The path may have been replaced since it was looked at: judge what was opened.
    let opened = file.metadata().map_err(Refusal::Io)?;
    regular(opened.file_type())?;
    if opened.len() > cap {
        return Err(Refusal::TooLarge {
            size: Some(opened.len()),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Refusal::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Refusal::TooLarge { size: None });
    }
    Ok(bytes)
}

/// Opens without blocking: a FIFO swapped in after the check does not stall the open.
fn open(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// What a file that is not regular is, for a message.
pub fn kind(file_type: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn regular(file_type: FileType) -> Result<(), Refusal> {
    if file_type.is_file() {
        Ok(())
    } else {
        Err(Refusal::NotRegular(kind(file_type)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_cap_is_read_and_one_byte_more_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"abcd").unwrap();
        assert_eq!(read(&file, 4).unwrap(), b"abcd");
        assert!(matches!(
            read(&file, 3),
            Err(Refusal::TooLarge { size: Some(4) })
        ));
    }

    #[test]
    fn devices_and_directories_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read(Path::new("/dev/zero"), 16),
            Err(Refusal::NotRegular("a character device"))
        ));
        assert!(matches!(
            read(dir.path(), 16),
            Err(Refusal::NotRegular("a directory"))
        ));
    }
}
