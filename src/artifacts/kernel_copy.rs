//! One file's archive of stored blocks, between two files on the same machine, its bytes moved
//! by the kernel (`copy_file_range`, what `std::io::copy` does from a file to a file on Linux)
//! as `cp` moves them, with only the blocks' headers and the tar entry's own blocks written from
//! here. The CRC-32 the gzip trailer holds is taken by a second thread reading the file beside
//! the copy, so the file's bytes never pass through this process on the copy's path.
//!
//! For [`super::local`] (the store's directory on the step's machine): a file whose start
//! [`super::archive::compresses`] judges incompressible is packed so, and an archive of one file
//! in stored blocks (whichever path wrote it) is unpacked so. Anything else (a directory,
//! compressed blocks, a name too long for the tar header on unpacking) takes the general path of
//! [`super::archive`]; the archives are the same `.tar.gz` either way.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use flate2::Crc;

use super::archive::{SAMPLE, compresses, invalid, new_file, set_attributes};
use super::stored::{HEADER, MAX_BLOCK, block_header, write_end, write_framed};

/// The tar stream's record.
const RECORD: u64 = 512;

/// Packs the file `source` into `out` (empty, at its start) as a `.tar.gz` of stored blocks;
/// its size. `None`, with nothing written, when `source` is not a file or its start compresses.
///
/// # Errors
/// Reading `source` or writing `out`; `source` changing size meanwhile.
pub(crate) fn pack_file(source: &Path, out: &mut File) -> io::Result<Option<u64>> {
    // As the general path names it: a link followed to its file.
    let source = &std::fs::canonicalize(source)?;
    let mut file = File::open(source)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() || compresses(&start_of(&mut file)?) {
        return Ok(None);
    }
    let size = metadata.len();
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&metadata, tar::HeaderMode::Complete);
    let name = source.file_name().unwrap_or("artifact".as_ref());
    // The entry's header (a long name's extra entry too), as `tar` writes it.
    let mut entry = tar::Builder::new(Vec::new());
    entry.append_data(&mut header, name, io::empty())?;
    let prefix = entry.get_ref().clone();
    let padding = (RECORD - size % RECORD) % RECORD;
    let suffix = vec![0; usize::try_from(padding + 2 * RECORD).expect("under 2 KiB")];

    std::thread::scope(|scope| {
        let data_crc = scope.spawn(|| crc_of(source, size));
        out.write_all(&HEADER)?;
        write_framed(out, &prefix)?;
        let mut left = size;
        while left > 0 {
            let n = left.min(MAX_BLOCK as u64);
            out.write_all(&block_header(usize::try_from(n).expect("a block")))?;
            if io::copy(&mut (&file).take(n), out)? != n {
                return Err(invalid("the file shrank while it was packed"));
            }
            left -= n;
        }
        write_framed(out, &suffix)?;
        let mut crc = Crc::new();
        crc.update(&prefix);
        crc.combine(&data_crc.join().expect("the CRC thread does not panic")?);
        crc.update(&suffix);
        write_end(out, &crc)?;
        Ok(Some(out.stream_position()?))
    })
}

/// The first [`SAMPLE`] bytes of `file`, which is left at its start.
fn start_of(file: &mut File) -> io::Result<Vec<u8>> {
    let mut start = Vec::with_capacity(SAMPLE);
    file.take(SAMPLE as u64).read_to_end(&mut start)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(start)
}

/// The CRC-32 of the first `size` bytes of `path`, read on its own.
fn crc_of(path: &Path, size: u64) -> io::Result<Crc> {
    let mut file = File::open(path)?.take(size);
    let mut crc = Crc::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => crc.update(&buf[..n]),
        }
    }
    if u64::from(crc.amount()) != size % (1 << 32) {
        return Err(invalid("the file shrank while it was packed"));
    }
    Ok(crc)
}

/// Unpacks the archive at `archive` to the file `dest` when it is one file's, in stored blocks;
/// `false`, with nothing written, when it is not (the general path then reads it).
///
/// # Errors
/// Reading the archive or writing `dest`; `InvalidData` when its CRC-32 or length is not its
/// trailer's, or a file is followed by more entries.
pub(crate) fn unpack_file(archive: &Path, dest: &Path) -> io::Result<bool> {
    let mut blocks = Blocks::open(archive)?;
    let mut record = [0; RECORD as usize];
    if !blocks.read_exact(&mut record)? {
        return Ok(false);
    }
    let header = tar::Header::from_byte_slice(&record);
    if !header.entry_type().is_file() || header.cksum()? != checksum(&record) {
        return Ok(false);
    }
    let size = header.size()?;
    std::thread::scope(|scope| {
        let checked = scope.spawn(|| check_trailer(archive));
        let out = new_file(dest)?;
        // A block not stored after all (compressed blocks of another writer): the general path
        // reads it again from the start, and replaces `dest`.
        if !blocks.copy_to(size, &out)? {
            return Ok(false);
        }
        let padding = (RECORD - size % RECORD) % RECORD;
        let mut rest = vec![0; usize::try_from(padding + RECORD).expect("under 1 KiB")];
        if !blocks.read_exact(&mut rest)? {
            return Ok(false);
        }
        if rest.iter().any(|b| *b != 0) {
            return Err(invalid("a file is followed by more entries"));
        }
        checked.join().expect("the CRC thread does not panic")?;
        set_attributes(&out, header)?;
        Ok(true)
    })
}

/// A tar header's checksum: its bytes summed, the checksum's own eight read as spaces.
fn checksum(record: &[u8; RECORD as usize]) -> u32 {
    (record.iter().enumerate())
        .map(|(i, b)| u32::from(if (148..156).contains(&i) { b' ' } else { *b }))
        .sum()
}

/// The stored blocks of a gzip file, read in order.
struct Blocks {
    file: File,
    /// Bytes left in the block being read.
    left: u64,
    last: bool,
}

impl Blocks {
    /// The archive past its gzip header; one with flags (a name, a comment) is not ours, and
    /// its blocks are never read.
    fn open(path: &Path) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let mut header = [0; 10];
        let ours = file.read_exact(&mut header).is_ok() && header[..4] == HEADER[..4];
        Ok(Self {
            file,
            left: 0,
            last: !ours,
        })
    }

    /// Starts the next block: `Some(true)` when it is stored, `Some(false)` when it is not,
    /// `None` after the last.
    fn next_block(&mut self) -> io::Result<Option<bool>> {
        if self.last {
            return Ok(None);
        }
        let mut head = [0; 5];
        self.file.read_exact(&mut head)?;
        // BFINAL, BTYPE = 00 and the padding to the byte: a stored block after a stored one.
        if head[0] & !1 != 0 {
            return Ok(Some(false));
        }
        let len = u16::from_le_bytes([head[1], head[2]]);
        if len != !u16::from_le_bytes([head[3], head[4]]) {
            return Err(invalid("a stored block's length is not its complement's"));
        }
        self.last = head[0] & 1 == 1;
        self.left = u64::from(len);
        Ok(Some(true))
    }

    /// Fills `buf` across blocks; `false` when the blocks end or one is not stored.
    fn read_exact(&mut self, mut buf: &mut [u8]) -> io::Result<bool> {
        while !buf.is_empty() {
            if self.left == 0 && self.next_block()? != Some(true) {
                return Ok(false);
            }
            let n = buf
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX));
            let (now, later) = buf.split_at_mut(n);
            self.file.read_exact(now)?;
            self.left -= n as u64;
            buf = later;
        }
        Ok(true)
    }

    /// Copies `size` bytes across blocks to `out`, by the kernel; `false` when the blocks end
    /// or one is not stored first.
    fn copy_to(&mut self, mut size: u64, mut out: &File) -> io::Result<bool> {
        while size > 0 {
            if self.left == 0 && self.next_block()? != Some(true) {
                return Ok(false);
            }
            let n = size.min(self.left);
            if io::copy(&mut (&self.file).take(n), &mut out)? != n {
                return Err(invalid("the archive ends inside its file"));
            }
            self.left -= n;
            size -= n;
        }
        Ok(true)
    }
}

/// Reads the archive's stored blocks on their own and checks its trailer: the CRC-32 and the
/// length of what they hold.
fn check_trailer(path: &Path) -> io::Result<()> {
    let mut blocks = Blocks::open(path)?;
    let mut crc = Crc::new();
    let mut buf = vec![0; 1 << 16];
    while blocks.next_block()? == Some(true) {
        while blocks.left > 0 {
            let n = buf
                .len()
                .min(usize::try_from(blocks.left).unwrap_or(usize::MAX));
            blocks.file.read_exact(&mut buf[..n])?;
            crc.update(&buf[..n]);
            blocks.left -= n as u64;
        }
    }
    if !blocks.last {
        return Err(invalid("a block of the archive is not stored"));
    }
    let mut trailer = [0; 8];
    blocks.file.read_exact(&mut trailer)?;
    let (sum, amount) = trailer.split_at(4);
    if sum != crc.sum().to_le_bytes() || amount != crc.amount().to_le_bytes() {
        return Err(invalid("its CRC-32 or length is not its trailer's"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use rand::{RngCore as _, SeedableRng as _};

    use super::*;
    use crate::artifacts::archive;

    /// `len` random bytes (incompressible) at `path`, mode 0750.
    fn random_file(path: &Path, len: usize) {
        let mut bytes = vec![0; len];
        rand::rngs::StdRng::seed_from_u64(5).fill_bytes(&mut bytes);
        std::fs::write(path, &bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o750)).unwrap();
    }

    fn packed_by_kernel(source: &Path, archive: &Path) -> Option<u64> {
        let mut out = File::create(archive).unwrap();
        pack_file(source, &mut out).unwrap()
    }

    #[test]
    fn a_file_packed_by_the_kernel_is_the_archive_any_reader_unpacks() {
        let dir = tempfile::tempdir().unwrap();
        let (source, packed) = (dir.path().join("model.bin"), dir.path().join("a.tgz"));
        // Past several blocks, not a multiple of one, nor of a tar record.
        random_file(&source, 3 * MAX_BLOCK + 1000);
        let size = packed_by_kernel(&source, &packed).unwrap();
        assert_eq!(size, std::fs::metadata(&packed).unwrap().len());

        let general = dir.path().join("general.bin");
        archive::unpack(File::open(&packed).unwrap(), &general).unwrap();
        assert_eq!(
            std::fs::read(&general).unwrap(),
            std::fs::read(&source).unwrap()
        );
        let tar = std::process::Command::new("tar")
            .args(["tzf", packed.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&tar.stdout),
            "model.bin\n",
            "{tar:?}"
        );

        let got = dir.path().join("got.bin");
        assert!(unpack_file(&packed, &got).unwrap());
        assert_eq!(
            std::fs::read(&got).unwrap(),
            std::fs::read(&source).unwrap()
        );
        let mode = std::fs::metadata(&got).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
    }

    #[test]
    fn the_general_paths_stored_archive_is_unpacked_by_the_kernel_and_others_are_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("blob");
        random_file(&source, 2 * SAMPLE + 7);
        let stored = dir.path().join("stored.tgz");
        archive::pack(&source, File::create(&stored).unwrap()).unwrap();
        let got = dir.path().join("got");
        assert!(unpack_file(&stored, &got).unwrap());
        assert_eq!(
            std::fs::read(&got).unwrap(),
            std::fs::read(&source).unwrap()
        );

        let text = dir.path().join("text");
        std::fs::write(&text, "compressible ".repeat(100_000)).unwrap();
        assert_eq!(packed_by_kernel(&text, &dir.path().join("never.tgz")), None);
        let compressed = dir.path().join("compressed.tgz");
        archive::pack(&text, File::create(&compressed).unwrap()).unwrap();
        let untouched = dir.path().join("untouched");
        assert!(!unpack_file(&compressed, &untouched).unwrap());
        assert!(!untouched.exists(), "nothing written for the general path");
        let (tree_dir, tree) = (dir.path().join("tree"), dir.path().join("tree.tgz"));
        std::fs::create_dir(&tree_dir).unwrap();
        std::fs::copy(&source, tree_dir.join("blob")).unwrap();
        archive::pack(&tree_dir, File::create(&tree).unwrap()).unwrap();
        assert!(
            !unpack_file(&tree, &untouched).unwrap(),
            "a directory's archive"
        );
    }

    #[test]
    fn a_changed_byte_is_refused_by_its_crc() {
        let dir = tempfile::tempdir().unwrap();
        let (source, packed) = (dir.path().join("f"), dir.path().join("f.tgz"));
        random_file(&source, 100_000);
        packed_by_kernel(&source, &packed).unwrap();
        let mut bytes = std::fs::read(&packed).unwrap();
        bytes[2000] ^= 1;
        std::fs::write(&packed, bytes).unwrap();
        let error = unpack_file(&packed, &dir.path().join("got")).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
    }
}
