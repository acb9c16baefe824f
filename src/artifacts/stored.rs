//! gzip of stored blocks (deflate's `BTYPE=00`, RFC 1951 section 3.2.4; the gzip framing of
//! RFC 1952), written without copying the bytes: a large write is framed in blocks of at most
//! 65,535 bytes whose headers go out beside the caller's own slices in one vectored write, and
//! the CRC-32 is taken on the way; small writes (a tar header) are gathered into one block.
//! `flate2`'s level 0 copies every byte into the encoder's buffers, and its window, before it
//! reaches the writer: for incompressible artifacts (what [`super::archive`] stores) the largest
//! cost of a put beside the file's own read and write.

use std::io::{self, IoSlice, Write};

use flate2::Crc;

/// The largest stored block.
pub(crate) const MAX_BLOCK: usize = 65_535;

/// A gzip member's header: deflate, no flags, no time, no extra flags, OS unknown (255), as
/// `flate2::GzBuilder` writes it.
pub(crate) const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Blocks framed by one vectored write (each a header and a slice): a 1 MiB write in one call.
const BLOCKS_PER_WRITE: usize = 16;

/// A gzip stream of stored blocks to `out`; [`StoredGzip::finish`] ends it.
pub(crate) struct StoredGzip<W: Write> {
    out: W,
    crc: Crc,
    started: bool,
    /// Small writes not yet framed, fewer than [`MAX_BLOCK`] bytes.
    pending: Vec<u8>,
}

impl<W: Write> StoredGzip<W> {
    pub(crate) fn new(out: W) -> Self {
        Self {
            out,
            crc: Crc::new(),
            started: false,
            pending: Vec::new(),
        }
    }

    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.out.write_all(&HEADER)?;
            self.started = true;
        }
        Ok(())
    }

    /// Frames what is pending as one block.
    fn write_pending(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.write_blocks(&pending)?;
            self.pending = pending;
            self.pending.clear();
        }
        Ok(())
    }

    /// `buf` (at most [`BLOCKS_PER_WRITE`] blocks) framed and written whole.
    fn write_blocks(&mut self, buf: &[u8]) -> io::Result<()> {
        write_framed(&mut self.out, buf)?;
        self.crc.update(buf);
        Ok(())
    }

    /// The last (empty) block and the trailer (CRC-32 and length, little-endian); the writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.start()?;
        self.write_pending()?;
        write_end(&mut self.out, &self.crc)?;
        Ok(self.out)
    }
}

/// `buf` framed in stored blocks, headers beside the slices, in one vectored write.
pub(crate) fn write_framed(out: &mut impl Write, buf: &[u8]) -> io::Result<()> {
    let blocks: Vec<&[u8]> = buf.chunks(MAX_BLOCK).collect();
    let headers: Vec<[u8; 5]> = blocks.iter().map(|b| block_header(b.len())).collect();
    let mut slices: Vec<IoSlice<'_>> = (headers.iter().zip(&blocks))
        .flat_map(|(header, block)| [IoSlice::new(header), IoSlice::new(block)])
        .collect();
    write_all_vectored(out, &mut slices)
}

/// The last (empty) block and the trailer: the CRC-32 and length of what the blocks held.
pub(crate) fn write_end(out: &mut impl Write, crc: &Crc) -> io::Result<()> {
    let mut end = vec![1, 0, 0, 0xff, 0xff];
    end.extend_from_slice(&crc.sum().to_le_bytes());
    end.extend_from_slice(&crc.amount().to_le_bytes());
    out.write_all(&end)
}

/// The header of a stored block of `len` bytes (not the last): `BFINAL=0`, `BTYPE=00`, byte
/// aligned, `LEN` and its complement.
pub(crate) fn block_header(len: usize) -> [u8; 5] {
    let len = u16::try_from(len).expect("a block holds at most 65,535 bytes");
    let [lo, hi] = len.to_le_bytes();
    [0, lo, hi, !lo, !hi]
}

impl<W: Write> Write for StoredGzip<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.start()?;
        if self.pending.len() + buf.len() < MAX_BLOCK {
            self.pending.extend_from_slice(buf);
            return Ok(buf.len());
        }
        self.write_pending()?;
        let taken = buf.len().min(MAX_BLOCK * BLOCKS_PER_WRITE);
        self.write_blocks(&buf[..taken])?;
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.start()?;
        self.write_pending()?;
        self.out.flush()
    }
}

/// Writes every slice (what the unstable `Write::write_all_vectored` does).
fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn what_is_written_in_any_pieces_gunzips_to_itself() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        for piece in [1, 512, MAX_BLOCK, MAX_BLOCK + 1, 1 << 20] {
            let mut gz = StoredGzip::new(Vec::new());
            for chunk in data.chunks(piece) {
                gz.write_all(chunk).unwrap();
            }
            let packed = gz.finish().unwrap();
            assert_eq!(gunzip(&packed), data, "written {piece} bytes at a time");
            assert!(
                packed.len() < data.len() + data.len() / 1000 + 64,
                "{piece}"
            );
        }
    }

    #[test]
    fn nothing_written_is_an_empty_gzip_stream() {
        let packed = StoredGzip::new(Vec::new()).finish().unwrap();
        assert_eq!(gunzip(&packed), b"");
    }
}
