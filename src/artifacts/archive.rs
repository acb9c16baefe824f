//! The `.tar.gz` an artifact is kept as, packed from and unpacked to local paths. Blocking I/O
//! (`tar` and `flate2` are synchronous): `transfer` runs it on a blocking thread, fed by or
//! feeding the store as it goes, so an artifact is never whole in memory.
//!
//! The layout, which `unpack` relies on and `tar xzf` reads as expected:
//! - a file: one entry, the file under its own name;
//! - a directory: `./` first, then its contents under `./` (empty directories included,
//!   symbolic links kept as links).
//!
//! The gzip level is chosen once per archive, from its first [`SAMPLE`] bytes: the fast level,
//! or stored blocks (level 0, still gzip, written by [`super::stored`] without copying the
//! bytes) when the fast level would save under a tenth of them.
//! On random or already-compressed bytes the fast level runs at a tenth of stored's speed, makes
//! them about 5% larger (fixed Huffman codes) and slows the unpacking as much.
//!
//! Unpacking a file puts it at the destination path; unpacking a directory recreates its
//! contents at the destination path (created if missing). Entries that would land outside the
//! destination (`..`, absolute paths, through a link) are refused, as `tar::Entry::unpack_in`
//! does.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;

use super::stored::StoredGzip;

/// gzip's fastest level: artifacts are often binaries or already compressed, where higher
/// levels cost several times the CPU for a few percent; `transfer` measures the difference.
const LEVEL: Compression = Compression::fast();

/// How much of an archive's start chooses its level (see the module's documentation).
pub(crate) const SAMPLE: usize = 256 * 1024;

/// The buffers between the store and the decompressor and between it and a file written: large
/// reads and writes, few system calls and few trips to the runtime for the next chunk.
pub(crate) const BUFFER: usize = 1 << 20;

/// Writes `path` (a file or a directory; a link to one is followed) as a `.tar.gz` to `out`.
///
/// # Errors
/// Reading `path`, or writing `out` (the store failing shows here too).
pub(crate) fn pack<W: Write>(path: &Path, out: W) -> io::Result<W> {
    let path = fs::canonicalize(path)?;
    let mut tar = tar::Builder::new(Gzip::Sampling(Vec::with_capacity(SAMPLE), Some(out)));
    tar.follow_symlinks(false);
    if path.is_dir() {
        tar.append_dir_all(".", &path)?;
    } else {
        let name = path.file_name().unwrap_or("artifact".as_ref());
        let file = File::open(&path)?;
        let mut header = tar::Header::new_gnu();
        header.set_metadata_in_mode(&file.metadata()?, tar::HeaderMode::Complete);
        // Read in [`BUFFER`]s, not `append_file`'s 8 KiB: as many fewer writes to the archive.
        tar.append_data(
            &mut header,
            name,
            io::BufReader::with_capacity(BUFFER, file),
        )?;
    }
    tar.into_inner()?.finish()
}

/// A gzip stream whose level is chosen by its first [`SAMPLE`] bytes, held until then.
enum Gzip<W: Write> {
    /// The start, and where the stream goes (taken once when the level is chosen).
    Sampling(Vec<u8>, Option<W>),
    /// Compressed. Boxed: the encoder's state is large beside the sample's.
    Encoding(Box<GzEncoder<W>>),
    /// Stored blocks, framed around the bytes as they come.
    Storing(StoredGzip<W>),
}

impl<W: Write> Gzip<W> {
    /// The encoder, started at the level the sample calls for when not yet.
    fn encoder(&mut self) -> io::Result<&mut dyn Write> {
        if let Gzip::Sampling(start, out) = self {
            let out = out.take().expect("the level is chosen once");
            let compress = compresses(start);
            let start = std::mem::take(start);
            *self = if compress {
                Gzip::Encoding(Box::new(GzEncoder::new(out, LEVEL)))
            } else {
                Gzip::Storing(StoredGzip::new(out))
            };
            self.encoder()?.write_all(&start)?;
        }
        match self {
            Gzip::Encoding(encoder) => Ok(&mut **encoder),
            Gzip::Storing(encoder) => Ok(encoder),
            Gzip::Sampling(..) => Err(io::Error::other("the gzip stream was not started")),
        }
    }

    fn finish(mut self) -> io::Result<W> {
        self.encoder()?;
        match self {
            Gzip::Encoding(encoder) => (*encoder).finish(),
            Gzip::Storing(encoder) => encoder.finish(),
            Gzip::Sampling(..) => Err(io::Error::other("the gzip stream was not started")),
        }
    }
}

impl<W: Write> Write for Gzip<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Gzip::Sampling(start, _) = self
            && start.len() < SAMPLE
        {
            let n = buf.len().min(SAMPLE - start.len());
            start.extend_from_slice(&buf[..n]);
            return Ok(n);
        }
        self.encoder()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Gzip::Sampling(..) => Ok(()),
            Gzip::Encoding(encoder) => encoder.flush(),
            Gzip::Storing(encoder) => encoder.flush(),
        }
    }
}

/// Whether [`LEVEL`] shrinks `start` by a tenth or more (else the archive is stored).
pub(crate) fn compresses(start: &[u8]) -> bool {
    let mut trial = GzEncoder::new(Vec::with_capacity(start.len()), LEVEL);
    trial.write_all(start).expect("writing to memory");
    let packed = trial.finish().expect("writing to memory").len();
    packed * 10 <= start.len() * 9
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
    let input = io::BufReader::with_capacity(BUFFER, input);
    let mut archive = tar::Archive::new(GzDecoder::new(input));
    let mut entries = archive.entries()?;
    let Some(first) = entries.next() else {
        return Err(invalid("it has no entries"));
    };
    let mut first = first?;
    if first.header().entry_type().is_file() {
        unpack_file(&mut first, dest)?;
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

/// Writes a file entry to `dest` (replacing a file there) through a [`BUFFER`]-sized buffer,
/// with the entry's permissions and modification time, as `tar::Entry::unpack` does: that
/// copies 8 KiB at a time, a read through the decompressor and a `write` each, 12,800 for a
/// 100 MiB file.
fn unpack_file<R: Read>(entry: &mut tar::Entry<'_, R>, dest: &Path) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(BUFFER, new_file(dest)?);
    let expected = entry.size();
    if io::copy(entry, &mut out)? != expected {
        return Err(invalid("the file is shorter than its header says"));
    }
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    set_attributes(&file, entry.header())
}

/// The file `dest`, new and empty (a file there replaced).
pub(crate) fn new_file(dest: &Path) -> io::Result<File> {
    match fs::remove_file(dest) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    // `create_new`: a link planted at `dest` since the removal is not followed.
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
}

/// The permissions and modification time of `header` given to `file`.
pub(crate) fn set_attributes(file: &File, header: &tar::Header) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    // What tar keeps by default: the permission bits, without set-id and sticky bits.
    let mode = header.mode()? & 0o777;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    if let Ok(mtime) = header.mtime() {
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime))?;
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

pub(crate) fn invalid(reason: &str) -> io::Error {
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

    /// `len` bytes no compressor can shrink (`rand` seeded: the same each run).
    fn random_bytes(len: usize) -> Vec<u8> {
        use rand::{RngCore, SeedableRng};
        let mut bytes = vec![0; len];
        rand::rngs::StdRng::seed_from_u64(7).fill_bytes(&mut bytes);
        bytes
    }

    #[test]
    fn random_bytes_are_stored_not_grown_by_compression() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("random.bin");
        let bytes = random_bytes(1 << 20);
        fs::write(&source, &bytes).unwrap();
        let packed = pack(&source, Vec::new()).unwrap();
        // Stored: the tar header and padding, gzip's header, trailer and 5 bytes a block.
        let overhead = packed.len() - bytes.len();
        assert!(overhead < 4096, "{overhead} bytes more than the file");
        let dest = dir.path().join("back.bin");
        unpack(packed.as_slice(), &dest).unwrap();
        assert!(fs::read(&dest).unwrap() == bytes);
    }

    #[test]
    fn text_after_a_whole_sample_is_still_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("log.txt");
        let text = "2026-11-28T05:00:00Z step s0 finished with exit code 0\n".repeat(20_000);
        fs::write(&source, &text).unwrap();
        let packed = pack(&source, Vec::new()).unwrap();
        assert!(packed.len() < text.len() / 10, "{} bytes", packed.len());
        let dest = dir.path().join("back.txt");
        unpack(packed.as_slice(), &dest).unwrap();
        assert_eq!(fs::read_to_string(&dest).unwrap(), text);
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
