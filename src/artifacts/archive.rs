//! The `.tar.gz` an artifact is kept as, packed from and unpacked to local paths. Blocking I/O
//! (`tar` and `flate2` are synchronous): `transfer` runs it on a blocking thread, fed by or
//! feeding the store as it goes, so an artifact is never whole in memory.
//!
//! The layout, which `unpack` relies on and `tar xzf` reads as expected:
//! - a file: one entry, the file under its own name;
//! - a directory: `./` first, then its contents under `./` (empty directories included,
//!   symbolic links kept as links).
//!
//! Unpacking a file puts it at the destination path; unpacking a directory recreates its
//! contents at the destination path (created if missing). Entries that would land outside the
//! destination (`..`, absolute paths, through a link) are refused, as `tar::Entry::unpack_in`
//! does.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

/// gzip's fastest level: artifacts are often binaries or already compressed, where higher
/// levels cost several times the CPU for a few percent; `transfer` measures the difference.
const LEVEL: Compression = Compression::fast();

/// Writes `path` (a file or a directory; a link to one is followed) as a `.tar.gz` to `out`.
///
/// # Errors
/// Reading `path`, or writing `out` (the store failing shows here too).
pub(crate) fn pack<W: Write>(path: &Path, out: W) -> io::Result<W> {
    let path = fs::canonicalize(path)?;
    let mut tar = tar::Builder::new(GzEncoder::new(out, LEVEL));
    tar.follow_symlinks(false);
    if path.is_dir() {
        tar.append_dir_all(".", &path)?;
    } else {
        let name = path.file_name().unwrap_or("artifact".as_ref());
        tar.append_file(name, &mut File::open(&path)?)?;
    }
    tar.into_inner()?.finish()
}

/// Unpacks a `.tar.gz` made by [`pack`] to `dest`, whose parent directory exists.
///
/// # Errors
/// `InvalidData` when the input is no such archive; otherwise reading the input or writing
/// under `dest`.
///
/// # Caveats
/// A failure part-way leaves what was unpacked so far.
pub(crate) fn unpack<R: Read>(input: R, dest: &Path) -> io::Result<()> {
    let mut archive = tar::Archive::new(GzDecoder::new(input));
    let mut entries = archive.entries()?;
    let Some(first) = entries.next() else {
        return Err(invalid("it has no entries"));
    };
    let mut first = first?;
    if first.header().entry_type().is_file() {
        first.unpack(dest)?;
        return match entries.next() {
            None => Ok(()),
            Some(_) => Err(invalid("a file is followed by more entries")),
        };
    }
    if !first.header().entry_type().is_dir() {
        return Err(invalid("its first entry is neither a file nor a directory"));
    }
    fs::create_dir_all(dest)?;
    // Directories last, as `tar::Archive::unpack` does: a read-only one would refuse its
    // contents.
    let mut directories = vec![first];
    for entry in entries {
        let mut entry = entry?;
        if entry.header().entry_type().is_dir() {
            directories.push(entry);
        } else {
            unpack_inside(&mut entry, dest)?;
        }
    }
    for mut directory in directories.into_iter().rev() {
        unpack_inside(&mut directory, dest)?;
    }
    Ok(())
}

fn unpack_inside<R: Read>(entry: &mut tar::Entry<'_, R>, dest: &Path) -> io::Result<()> {
    if entry.unpack_in(dest)? {
        return Ok(());
    }
    let path = entry.path()?.display().to_string();
    Err(invalid(&format!(
        "entry {path} would be outside the directory"
    )))
}

fn invalid(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn round_trip(source: &Path, dest: &Path) {
        let packed = pack(source, Vec::new()).unwrap();
        unpack(packed.as_slice(), dest).unwrap();
    }

    #[test]
    fn a_file_comes_back_at_the_destination_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("tool.sh");
        fs::write(&source, "#!/bin/sh\necho hi\n").unwrap();
        fs::set_permissions(&source, fs::Permissions::from_mode(0o755)).unwrap();
        let dest = dir.path().join("elsewhere");
        round_trip(&source, &dest);
        assert_eq!(fs::read_to_string(&dest).unwrap(), "#!/bin/sh\necho hi\n");
        let mode = fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn a_directory_comes_back_with_nested_and_empty_directories_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("out");
        fs::create_dir_all(source.join("a/b")).unwrap();
        fs::create_dir_all(source.join("empty")).unwrap();
        fs::write(source.join("top.txt"), "top").unwrap();
        fs::write(source.join("a/b/deep.txt"), "deep").unwrap();
        std::os::unix::fs::symlink("a/b/deep.txt", source.join("link")).unwrap();
        let dest = dir.path().join("in");
        round_trip(&source, &dest);
        assert_eq!(fs::read_to_string(dest.join("top.txt")).unwrap(), "top");
        assert_eq!(
            fs::read_to_string(dest.join("a/b/deep.txt")).unwrap(),
            "deep"
        );
        assert!(dest.join("empty").is_dir());
        assert_eq!(fs::read_dir(dest.join("empty")).unwrap().count(), 0);
        let link = fs::read_link(dest.join("link")).unwrap();
        assert_eq!(link, Path::new("a/b/deep.txt"));
    }

    #[test]
    fn a_read_only_directory_still_gets_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("out");
        fs::create_dir_all(source.join("sealed")).unwrap();
        fs::write(source.join("sealed/file"), "x").unwrap();
        fs::set_permissions(source.join("sealed"), fs::Permissions::from_mode(0o555)).unwrap();
        let dest = dir.path().join("in");
        round_trip(&source, &dest);
        assert_eq!(fs::read_to_string(dest.join("sealed/file")).unwrap(), "x");
        for path in [source.join("sealed"), dest.join("sealed")] {
            fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn an_entry_that_leaves_the_destination_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), LEVEL));
        let mut root = tar::Header::new_gnu();
        root.set_entry_type(tar::EntryType::Directory);
        root.set_size(0);
        tar.append_data(&mut root, ".", io::empty()).unwrap();
        let mut escape = tar::Header::new_gnu();
        escape.set_size(1);
        // `append_data` refuses `..`; written into the header's bytes, as a hostile tool would.
        escape.as_old_mut().name[..9].copy_from_slice(b"../escape");
        escape.set_cksum();
        tar.append(&escape, &b"x"[..]).unwrap();
        let packed = tar.into_inner().unwrap().finish().unwrap();
        let error = unpack(packed.as_slice(), &dir.path().join("in")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn what_is_not_a_tar_gz_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let error = unpack(&b"plain text"[..], &dir.path().join("x")).unwrap_err();
        assert!(
            matches!(
                error.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
            ),
            "{error:?}"
        );
    }
}
