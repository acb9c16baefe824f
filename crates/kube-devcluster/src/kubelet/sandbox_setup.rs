//! The sandbox's setup, done by the container's own process between `fork` and `exec`
//! (`pre_exec`), so a sandboxed container is one process as a plain one is: no `unshare`
//! binary, no shell, no `mkdir` or `mount` process per step. [`crate::kubelet::volumes`] plans
//! the [`Step`]s; [`enter`] prepares every path as a C string before the fork and gives the
//! command the closure that runs them.
//!
//! In the forked child (a copy of a multi-threaded process) only async-signal-safe work is
//! sound: the closure makes system calls through `rustix` on prepared C strings and stack
//! buffers, and never allocates. It makes a user and mount namespace of its own with the
//! caller mapped to root (as util-linux `unshare --user --map-root-user --mount --propagation
//! private` does: `setgroups` denied, then the uid and gid maps), runs the steps, and enters the
//! container's root and working directory (`chroot` and `chdir`, as `unshare --root --wd`).
//! Where a step fails, it writes what failed and why to the sandbox's error file and the spawn
//! fails with that error; the kubelet reads the file ([`crate::kubelet::volumes::Sandbox::start_error`]).

use std::ffi::{CStr, CString};
use std::fmt;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, StatVfsMountFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};

/// One step of building the container's root, outside it (paths are the host's, in the new
/// mount namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// `mkdir -p`: the directory and its missing parents.
    MkdirAll(PathBuf),
    /// An empty file, unless something is there already.
    Touch(PathBuf),
    /// A symbolic link at `at` to `target`.
    Symlink { target: PathBuf, at: PathBuf },
    /// A bind mount (`--rbind`, with the mounts below `source`, when `recursive`).
    Bind {
        source: PathBuf,
        target: PathBuf,
        recursive: bool,
    },
    /// A new filesystem of type `fstype` (tmpfs, overlay, devpts) at `target`.
    Mount {
        fstype: &'static str,
        source: &'static str,
        target: PathBuf,
        data: String,
        flags: MountFlags,
    },
    /// The mount at the path made read-only (its other flags kept: a user namespace may not
    /// clear `nosuid`, `nodev` or `noexec` of a mount it did not make).
    ReadOnly(PathBuf),
    /// An overlay at the host directory's place in the root, else (the kernel refuses one over
    /// a directory with mounts below it) a tmpfs there holding a read-only bind mount of each
    /// of the host directory's entries and a copy of each link.
    OverlayOrShadow {
        /// The host's directory.
        host: PathBuf,
        /// Its place in the root.
        at: PathBuf,
        /// The overlay's options.
        data: String,
    },
}

impl fmt::Display for Step {
    /// The step as the command that would do it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MkdirAll(path) => write!(f, "mkdir -p {}", path.display()),
            Self::Touch(path) => write!(f, "touch {}", path.display()),
            Self::Symlink { target, at } => {
                write!(f, "ln -s {} {}", target.display(), at.display())
            }
            Self::Bind {
                source,
                target,
                recursive,
            } => {
                let how = if *recursive { "--rbind" } else { "--bind" };
                write!(f, "mount {how} {} {}", source.display(), target.display())
            }
            Self::Mount {
                fstype,
                source,
                target,
                data,
                flags,
            } => {
                let mut options = data.clone();
                for (flag, name) in [(MountFlags::NOSUID, "nosuid"), (MountFlags::NODEV, "nodev")] {
                    if flags.contains(flag) {
                        options.push(',');
                        options.push_str(name);
                    }
                }
                write!(
                    f,
                    "mount -t {fstype} -o {options} {source} {}",
                    target.display()
                )
            }
            Self::ReadOnly(path) => write!(f, "mount -o remount,bind,ro {}", path.display()),
            Self::OverlayOrShadow { host, at, data } => write!(
                f,
                "mount -t overlay -o {data} overlay {} (else a copy of {})",
                at.display(),
                host.display()
            ),
        }
    }
}

/// Gives `command` the sandbox: the user and mount namespace, the `steps`, then `root` and
/// `working_dir` (a path in the root) entered; a failure is written to `error_file`.
///
/// # Errors
/// A path with a NUL byte, which no system call takes.
pub(crate) fn enter(
    command: &mut tokio::process::Command,
    steps: &[Step],
    root: &Path,
    working_dir: &str,
    error_file: &Path,
) -> Result<(), String> {
    let setup = Prepared::new(steps, root, working_dir, error_file)?;
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // work is sound: `Prepared::run` makes system calls on C strings made before the fork and
    // on stack buffers, and allocates nothing (no formatting, no `CString`, no `Vec`).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || setup.run());
    }
    Ok(())
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}

fn c_text(text: &str) -> Result<CString, String> {
    CString::new(text).map_err(|_| format!("{text:?} contains a NUL byte"))
}

/// A [`Step`] with its paths as C strings.
enum Op {
    /// Each path from the top down; one that exists is fine.
    Mkdirs(Vec<CString>),
    Touch(CString),
    Symlink(CString, CString),
    Bind(CString, CString, bool),
    Mount {
        fstype: CString,
        source: CString,
        target: CString,
        data: CString,
        flags: MountFlags,
    },
    ReadOnly(CString),
    OverlayOrShadow {
        host: CString,
        at: CString,
        data: CString,
    },
}

/// What the child does, every byte of it made before the fork.
struct Prepared {
    /// Each op with its description for the error file.
    ops: Vec<(Op, CString)>,
    uid_map: CString,
    gid_map: CString,
    root: CString,
    working_dir: CString,
    error_file: CString,
}

impl Prepared {
    fn new(
        steps: &[Step],
        root: &Path,
        working_dir: &str,
        error_file: &Path,
    ) -> Result<Self, String> {
        let ops = steps
            .iter()
            .map(|step| Ok((op_of(step)?, c_text(&step.to_string())?)))
            .collect::<Result<_, String>>()?;
        Ok(Self {
            ops,
            uid_map: c_text(&format!("0 {} 1", rustix::process::getuid().as_raw()))?,
            gid_map: c_text(&format!("0 {} 1", rustix::process::getgid().as_raw()))?,
            root: c_path(root)?,
            working_dir: c_text(working_dir)?,
            error_file: c_path(error_file)?,
        })
    }

    /// In the child: the namespace, the steps, the root. Allocates nothing.
    fn run(&self) -> std::io::Result<()> {
        let result = self.namespace().and_then(|()| {
            for (op, what) in &self.ops {
                run_op(op).map_err(|errno| (what.as_c_str(), errno))?;
            }
            rustix::process::chroot(self.root.as_c_str())
                .map_err(|e| (c"entering the container's root", e))?;
            rustix::process::chdir(self.working_dir.as_c_str())
                .map_err(|e| (c"entering the working directory", e))
        });
        result.map_err(|(what, errno)| {
            self.report(what, errno);
            std::io::Error::from_raw_os_error(errno.raw_os_error())
        })
    }

    /// A user and mount namespace, the caller root in it, no mount event shared with the host.
    fn namespace(&self) -> Result<(), (&'static CStr, rustix::io::Errno)> {
        use rustix::thread::UnshareFlags;
        // SAFETY: the forked child is single-threaded, and FILES is not unshared.
        #[allow(unsafe_code)]
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }
            .map_err(|e| (c"unshare --user --mount", e))?;
        write_file(c"/proc/self/setgroups", b"deny").map_err(|e| (c"denying setgroups", e))?;
        write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())
            .map_err(|e| (c"writing the uid map", e))?;
        write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())
            .map_err(|e| (c"writing the gid map", e))?;
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )
        .map_err(|e| (c"making the mounts private", e))
    }

    /// Writes `what: why` to the error file; nothing more can be done if that fails.
    fn report(&self, what: &CStr, errno: rustix::io::Errno) {
        let Ok(file) = rustix::fs::open(
            self.error_file.as_c_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) else {
            return;
        };
        for part in [what.to_bytes(), b": ", errno_name(errno)] {
            let _ = rustix::io::write(&file, part);
        }
    }
}

/// The error's description as `strerror` gives the common ones (a fixed string: no
/// allocation after the fork).
fn errno_name(errno: rustix::io::Errno) -> &'static [u8] {
    use rustix::io::Errno;
    match errno {
        Errno::PERM => b"Operation not permitted",
        Errno::NOENT => b"No such file or directory",
        Errno::ACCESS => b"Permission denied",
        Errno::EXIST => b"File exists",
        Errno::NOTDIR => b"Not a directory",
        Errno::ISDIR => b"Is a directory",
        Errno::INVAL => b"Invalid argument",
        Errno::ROFS => b"Read-only file system",
        Errno::NOSPC => b"No space left on device",
        Errno::NAMETOOLONG => b"File name too long",
        Errno::LOOP => b"Too many levels of symbolic links",
        Errno::NODEV => b"No such device",
        Errno::BUSY => b"Device or resource busy",
        Errno::NOMEM => b"Cannot allocate memory",
        _ => b"system error",
    }
}

fn op_of(step: &Step) -> Result<Op, String> {
    Ok(match step {
        Step::MkdirAll(path) => Op::Mkdirs(
            path.ancestors()
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .filter(|p| p.parent().is_some())
                .map(c_path)
                .collect::<Result<_, _>>()?,
        ),
        Step::Touch(path) => Op::Touch(c_path(path)?),
        Step::Symlink { target, at } => Op::Symlink(c_path(target)?, c_path(at)?),
        Step::Bind {
            source,
            target,
            recursive,
        } => Op::Bind(c_path(source)?, c_path(target)?, *recursive),
        Step::Mount {
            fstype,
            source,
            target,
            data,
            flags,
        } => Op::Mount {
            fstype: c_text(fstype)?,
            source: c_text(source)?,
            target: c_path(target)?,
            data: c_text(data)?,
            flags: *flags,
        },
        Step::ReadOnly(path) => Op::ReadOnly(c_path(path)?),
        Step::OverlayOrShadow { host, at, data } => Op::OverlayOrShadow {
            host: c_path(host)?,
            at: c_path(at)?,
            data: c_text(data)?,
        },
    })
}

type Outcome = Result<(), rustix::io::Errno>;

fn run_op(op: &Op) -> Outcome {
    match op {
        Op::Mkdirs(paths) => paths.iter().try_for_each(|p| mkdir(p)),
        Op::Touch(path) => touch(path),
        Op::Symlink(target, at) => rustix::fs::symlink(target.as_c_str(), at.as_c_str()),
        Op::Bind(source, target, recursive) => bind(source, target, *recursive),
        Op::Mount {
            fstype,
            source,
            target,
            data,
            flags,
        } => rustix::mount::mount(
            source.as_c_str(),
            target.as_c_str(),
            fstype.as_c_str(),
            *flags,
            data.as_c_str(),
        ),
        Op::ReadOnly(path) => read_only(path),
        Op::OverlayOrShadow { host, at, data } => rustix::mount::mount(
            c"overlay",
            at.as_c_str(),
            c"overlay",
            MountFlags::empty(),
            data.as_c_str(),
        )
        .or_else(|_| shadow(host, at)),
    }
}

fn mkdir(path: &CStr) -> Outcome {
    match rustix::fs::mkdir(path, Mode::from_raw_mode(0o755)) {
        Err(rustix::io::Errno::EXIST) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

/// An empty file at `path` unless something is there (which may be on a read-only mount).
fn touch(path: &CStr) -> Outcome {
    if rustix::fs::access(path, rustix::fs::Access::EXISTS).is_ok() {
        return Ok(());
    }
    rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map(drop)
}

fn bind(source: &CStr, target: &CStr, recursive: bool) -> Outcome {
    if recursive {
        rustix::mount::mount_bind_recursive(source, target)
    } else {
        rustix::mount::mount_bind(source, target)
    }
}

/// The bind mount at `path` made read-only, keeping the flags a user namespace may not clear.
fn read_only(path: &CStr) -> Outcome {
    let current = rustix::fs::statvfs(path)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (has, keep) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
    ] {
        if current.contains(has) {
            flags |= keep;
        }
    }
    rustix::mount::mount_remount(path, flags, c"")
}

/// A path of at most `PATH_MAX` bytes built on the stack: `base/name`.
struct Joined {
    bytes: [u8; 4096],
}

impl Joined {
    fn new(base: &CStr, name: &CStr) -> Result<Self, rustix::io::Errno> {
        let (base, name) = (base.to_bytes(), name.to_bytes());
        let mut bytes = [0u8; 4096];
        let end = base.len() + 1 + name.len();
        if end >= bytes.len() {
            return Err(rustix::io::Errno::NAMETOOLONG);
        }
        bytes[..base.len()].copy_from_slice(base);
        bytes[base.len()] = b'/';
        bytes[base.len() + 1..end].copy_from_slice(name);
        Ok(Self { bytes })
    }

    fn as_c_str(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.bytes).unwrap_or(c"")
    }
}

/// A tmpfs at `at` holding, for each entry of the host's `host`, a read-only bind mount of
/// it (a directory with the mounts below it) or a copy of its link, so new entries go to the
/// tmpfs.
fn shadow(host: &CStr, at: &CStr) -> Outcome {
    rustix::mount::mount(c"tmpfs", at, c"tmpfs", MountFlags::empty(), c"mode=0755")?;
    let dir = rustix::fs::open(
        host,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = rustix::fs::RawDir::new(&dir, &mut buffer);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => FileType::from_raw_mode(
                rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
            ),
            kind => kind,
        };
        let (source, target) = (Joined::new(host, name)?, Joined::new(at, name)?);
        let (source, target) = (source.as_c_str(), target.as_c_str());
        match kind {
            FileType::Symlink => {
                let mut link = [0u8; 4096];
                let len = rustix::fs::readlinkat_raw(&dir, name, &mut link[..4095])?;
                let link = CStr::from_bytes_until_nul(&link[..=len]).unwrap_or(c"");
                rustix::fs::symlink(link, target)?;
                continue;
            }
            FileType::Directory => {
                mkdir(target)?;
                bind(source, target, true)?;
            }
            _ => {
                touch(target)?;
                bind(source, target, false)?;
            }
        }
        read_only(target)?;
    }
    Ok(())
}

/// Writes `bytes` to the file at `path` (a `/proc` control file).
fn write_file(path: &CStr, bytes: &[u8]) -> Outcome {
    let file = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&file, bytes).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_step_fails_the_spawn_and_names_the_step_and_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let (root, error_file) = (dir.path().join("root"), dir.path().join("start-error"));
        std::fs::create_dir(&root).unwrap();
        let missing = dir.path().join("missing");
        let steps = [
            Step::MkdirAll(root.join("made")),
            Step::Bind {
                source: missing.clone(),
                target: root.join("made"),
                recursive: false,
            },
        ];
        let mut command = tokio::process::Command::new("true");
        enter(&mut command, &steps, &root, "/", &error_file).unwrap();

        let error = command
            .spawn()
            .expect_err("the bind mount of a missing directory fails");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
        assert_eq!(
            std::fs::read_to_string(&error_file).unwrap(),
            format!(
                "mount --bind {} {}: No such file or directory",
                missing.display(),
                root.join("made").display()
            )
        );
        // The steps before it ran, in the child's own mount namespace.
        assert!(root.join("made").is_dir());
    }
}
