//! A pseudo-terminal for `kubectl exec -t` ([`crate::kubelet::exec`]): the command gets the
//! terminal's side as its stdin, stdout and stderr (and, through util-linux `setsid --ctty`, as
//! its controlling terminal), the session reads and writes the other side, and a resize sets
//! the terminal's size, which the kernel tells the command with SIGWINCH.
//!
//! rustix's safe calls (`openpt`, `tcsetwinsize`) keep the crate free of unsafe code; making
//! the terminal the controlling one needs `setsid` and `ioctl(TIOCSCTTY)` in the child before
//! exec, which only `pre_exec` (unsafe) could do here, so the `setsid` program does it.

use std::os::fd::OwnedFd;
use std::process::Stdio;

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;

/// The terminal's side the session keeps.
pub struct Pty {
    master: OwnedFd,
}

/// The command's side: its stdin, stdout and stderr.
pub struct Slave {
    fd: OwnedFd,
}

/// A new terminal, both sides.
pub fn open() -> std::io::Result<(Pty, Slave)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    // NOCTTY: the terminal must not become this process's own; the command's `setsid -c`
    // takes it.
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok((Pty { master }, Slave { fd: slave }))
}

impl Slave {
    /// One of the command's standard streams on the terminal.
    pub fn stdio(&self) -> std::io::Result<Stdio> {
        Ok(Stdio::from(self.fd.try_clone()?))
    }
}

impl Pty {
    /// Sets the terminal's size (columns, rows).
    pub fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        let size = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        Ok(rustix::termios::tcsetwinsize(&self.master, size)?)
    }

    /// A handle that reads what the command writes to the terminal. Once the command's side
    /// is closed everywhere, reading fails (EIO), which is its end.
    pub fn reader(&self) -> std::io::Result<tokio::fs::File> {
        Ok(tokio::fs::File::from_std(self.master.try_clone()?.into()))
    }

    /// A handle that types into the terminal.
    pub fn writer(&self) -> std::io::Result<tokio::fs::File> {
        self.reader()
    }
}
