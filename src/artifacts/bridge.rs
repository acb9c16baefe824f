//! Blocking `Write` and `Read` over the store's async upload and download, for `archive` on a
//! blocking thread. Each keeps the store's own error when the store fails, so that `transfer`
//! can say what the store refused instead of "I/O error" (`tar` re-wraps reader errors in a
//! type of its own, which would hide it).

use std::io::{self, Read, Write};

use bytes::{Buf, Bytes};
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::buffered::BufWriter;
use tokio::runtime::Handle;
use tokio_util::io::SyncIoBridge;

/// An upload being written: counts the bytes and keeps the store's error.
pub(crate) struct Upload {
    inner: SyncIoBridge<BufWriter>,
    /// Bytes written so far: the stored object's size once done.
    pub(crate) written: u64,
    /// The store's error, once a write failed because of it.
    pub(crate) fault: Option<object_store::Error>,
}

impl Upload {
    /// Writes through `writer` from a blocking thread of `handle`'s runtime.
    pub(crate) fn new(writer: BufWriter, handle: Handle) -> Self {
        Upload {
            inner: SyncIoBridge::new_with_handle(writer, handle),
            written: 0,
            fault: None,
        }
    }

    /// The async writer back, to finish or abort the upload.
    pub(crate) fn into_writer(self) -> BufWriter {
        self.inner.into_inner()
    }

    fn keep_fault(&mut self, error: io::Error) -> io::Error {
        match store_fault(error) {
            Ok(fault) => {
                self.fault = Some(fault);
                io::Error::other("the artifact store failed")
            }
            Err(error) => error,
        }
    }
}

/// The store's error inside an I/O error of `BufWriter`, or the I/O error as it was.
pub(crate) fn store_fault(error: io::Error) -> Result<object_store::Error, io::Error> {
    if !error
        .get_ref()
        .is_some_and(|inner| inner.is::<object_store::Error>())
    {
        return Err(error);
    }
    let inner = error.into_inner().expect("checked above");
    Ok(*inner.downcast().expect("checked above"))
}

impl Write for Upload {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.inner.write(buf) {
            Ok(n) => {
                self.written += n as u64;
                Ok(n)
            }
            Err(error) => Err(self.keep_fault(error)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|error| self.keep_fault(error))
    }
}

/// A download being read, chunk by chunk as the store sends it; keeps the store's error.
pub(crate) struct Download {
    chunks: BoxStream<'static, object_store::Result<Bytes>>,
    current: Bytes,
    handle: Handle,
    /// The store's error, once a read failed because of it.
    pub(crate) fault: Option<object_store::Error>,
}

impl Download {
    /// Reads `chunks` from a blocking thread of `handle`'s runtime.
    pub(crate) fn new(
        chunks: BoxStream<'static, object_store::Result<Bytes>>,
        handle: Handle,
    ) -> Self {
        Download {
            chunks,
            current: Bytes::new(),
            handle,
            fault: None,
        }
    }
}

impl Read for Download {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.handle.block_on(self.chunks.next()) {
                None => return Ok(0),
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(error)) => {
                    self.fault = Some(error);
                    return Err(io::Error::other("the artifact store failed"));
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}
