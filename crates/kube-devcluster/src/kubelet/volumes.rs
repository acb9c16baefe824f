//! A pod's volumes, made real for its process: [`materialise`] writes each volume of the pod
//! into a directory of its own, and [`Sandbox`] runs the container's process where those
//! directories appear at their `mountPath`s, without root and without changing anything on the
//! host.
//!
//! Volumes (k8s.io/kubernetes pkg/volume): `emptyDir` (an empty directory, kept across container
//! restarts, gone with the pod), `configMap` and `secret` (a file per key, or per `items` entry
//! at its `path`, with `mode` or `defaultMode`, default 0644; a missing one that is not
//! `optional` holds the pod, as pkg/volume/configmap and pkg/volume/secret `SetUpAt` fail with
//! `configmap "x" not found`), `projected` (its `configMap` and `secret` sources in one
//! directory; `downwardAPI` and `serviceAccountToken` sources are not written), and
//! `persistentVolumeClaim` (the claim's own directory, see [`crate::controllers::claims`]), and
//! `hostPath` of a directory (the host's own, read-write, as a container runtime mounts it: the
//! control plane runs as its user, so a pod reaches only what that user can). Other kinds fail
//! the pod saying so.
//!
//! The process runs in a user and mount namespace of its own, whose mount changes no other
//! process sees, and builds the container's root there itself before it execs the container's
//! command ([`crate::kubelet::sandbox_setup`]: system calls in the forked child, no helper
//! process), following the [`Step`]s planned here: a bind mount of the host's `/`, read-only
//! (the mounts below it, as `/proc`, `/sys` and `/dev`, as they are), or, when a mount point is
//! to be made at the top
//! (`/workspace`), a tmpfs holding a read-only bind mount of each of the host's entries instead;
//! at `/tmp` an overlay of the pod's over the host's `/tmp` (it reads what is there, as a
//! container that is not sandboxed does, so what a container sees does not depend on whether it
//! is sandboxed; what it writes there is its own, as in a container), the pod's scratch
//! directory (its `HOME`) at its own path, each volume bind-mounted at its `mountPath`
//! (read-only when `readOnly`, the `subPath` of the volume when given), and last the
//! container's termination message file at its `terminationMessagePath`
//! ([`crate::kubelet::termination_message`]). A mount point in `/dev` the host lacks (that file at
//! `/dev/termination-log`) gives the container a `/dev` of its own, as a container runtime
//! makes it, with only the host's few standard devices bound in. A mount point or
//! `workingDir` missing on the host is created where nothing is shared: directly in the root's
//! tmpfs, in `/tmp` or a volume, or else in an overlay (the host's directory as its read-only
//! lower layer, a tmpfs of the pod's as the upper) put over its nearest existing ancestor, or,
//! where the kernel refuses that overlay (mounts below the directory), a tmpfs over the
//! ancestor holding read-only bind mounts of its entries. The
//! process then enters that root and the working directory (`chroot`, `chdir`) and execs the
//! container's command. Where a step fails, it leaves its reason in a file the kubelet reads
//! ([`Sandbox::start_error`]), and the container fails to start with it.
//!
//! A file the host makes in its `/tmp` after the container looked for it and found nothing
//! stays unseen there (overlayfs keeps the failed lookup; the host's changes under an overlay's
//! lower layer are not promised to show): what the host adds later is seen through its other
//! directories, bound as they are.
//!
//! Whether the machine allows unprivileged user namespaces is checked once ([`available`]);
//! where it does not, a pod that needs a sandbox fails to start, saying so.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use rustix::mount::MountFlags;
use serde_json::Value;

use super::sandbox_setup::{self, Step};

/// The file mode of a ConfigMap's or Secret's files unless the volume says otherwise
/// (`SecretVolumeSourceDefaultMode`, `ConfigMapVolumeSourceDefaultMode`: 0644).
const DEFAULT_MODE: u32 = 0o644;

/// The devcluster's data directory: pods' volumes and claims' directories, removed with the
/// control plane. Created on first use.
#[derive(Default)]
pub(crate) struct VolumeHost {
    dir: OnceLock<Result<tempfile::TempDir, String>>,
}

impl VolumeHost {
    fn root(&self) -> Result<&Path, String> {
        self.dir
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("devcluster-data-")
                    .tempdir()
                    .map_err(|e| format!("cannot create the devcluster's data directory: {e}"))
            })
            .as_ref()
            .map(tempfile::TempDir::path)
            .map_err(Clone::clone)
    }

    /// The directory of a claim (by uid), created if needed.
    pub fn claim_dir(&self, uid: &str) -> Result<PathBuf, String> {
        let dir = self.root()?.join("claims").join(uid);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the claim's directory: {e}"))?;
        Ok(dir)
    }

    /// Removes a deleted claim's directory and what it held.
    pub fn remove_claim(&self, uid: &str) {
        if let Ok(root) = self.root() {
            let _ = std::fs::remove_dir_all(root.join("claims").join(uid));
        }
    }

    /// A fresh directory for a pod (by uid).
    fn pod_dir(&self, uid: &str) -> Result<PathBuf, String> {
        let dir = self.root()?.join("pods").join(uid);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the pod's volume directory: {e}"))?;
        Ok(dir)
    }
}

/// What the volumes are made of, read from the cluster.
pub(crate) trait Sources {
    /// A ConfigMap's `data` and (decoded) `binaryData`; `None` when it does not exist.
    fn config_map(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
    /// A Secret's (decoded) `data`; `None` when it does not exist.
    fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
    /// The directory of a bound claim, or the scheduler's reason why the pod cannot be placed.
    fn claim(&self, name: &str) -> Result<PathBuf, String>;
}

/// Why a pod's volumes are not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// The scheduler cannot place the pod (a claim that does not exist): its message.
    Unschedulable(String),
    /// A volume cannot be set up yet (a missing ConfigMap or Secret): the kubelet's
    /// `FailedMount` message.
    FailedMount(String),
    /// The pod can never run here: why.
    Unsupported(String),
}

/// A pod's volumes on disk; removed when dropped.
pub(crate) struct PodVolumes {
    dir: PathBuf,
    volumes: HashMap<String, PathBuf>,
}

impl Drop for PodVolumes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PodVolumes {
    /// The pod's directory (fresh, by uid) with no volumes in it yet.
    pub fn new(host: &VolumeHost, uid: &str) -> Result<Self, String> {
        Ok(Self {
            dir: host.pod_dir(uid)?,
            volumes: HashMap::new(),
        })
    }

    /// The pod's directory, where its containers' termination message files are made.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Writes the pod's volumes (`spec.volumes`) under `host`'s directory for the pod.
pub(crate) fn materialise(
    host: &VolumeHost,
    pod: &Value,
    sources: &dyn Sources,
) -> Result<PodVolumes, Blocked> {
    let volumes: &[Value] = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    // The scheduler comes first: a pod whose claim is missing is never given to a kubelet.
    let mut claims = HashMap::new();
    for volume in volumes {
        if let Some(claim) = volume.pointer("/persistentVolumeClaim/claimName") {
            let claim = claim.as_str().unwrap_or_default();
            let dir = sources.claim(claim).map_err(Blocked::Unschedulable)?;
            claims.insert(name_of(volume).to_string(), dir);
        }
    }
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut made = PodVolumes::new(host, uid).map_err(Blocked::Unsupported)?;
    let dir = made.dir.clone();
    for (index, volume) in volumes.iter().enumerate() {
        let name = name_of(volume);
        if let Some(claim_dir) = claims.remove(name) {
            made.volumes.insert(name.to_string(), claim_dir);
            continue;
        }
        if let Some(source) = volume.get("hostPath") {
            made.volumes
                .insert(name.to_string(), host_path(name, source)?);
            continue;
        }
        // By index: a volume's name need not be a valid file name here.
        let target = dir.join("volumes").join(index.to_string());
        std::fs::create_dir_all(&target)
            .map_err(|e| Blocked::Unsupported(format!("volume {name:?}: {e}")))?;
        write_volume(volume, &target, sources)?;
        made.volumes.insert(name.to_string(), target);
    }
    Ok(made)
}

/// The host's directory a `hostPath` volume names, checked as its `type` asks
/// (pkg/volume/hostpath/host_path.go `checkType`: `hostPath type check failed: PATH is not a
/// directory`; `DirectoryOrCreate` makes it, mode 0755). Only directories: a file, socket or
/// device type can never run here.
fn host_path(name: &str, source: &Value) -> Result<PathBuf, Blocked> {
    let path = PathBuf::from(
        source
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    let kind = source
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let failed = |why: String| {
        Blocked::FailedMount(format!(
            "MountVolume.SetUp failed for volume \"{name}\" : {why}"
        ))
    };
    match kind {
        "" => Ok(path),
        "Directory" if path.is_dir() => Ok(path),
        "Directory" => Err(failed(format!(
            "hostPath type check failed: {} is not a directory",
            path.display()
        ))),
        "DirectoryOrCreate" => {
            std::fs::create_dir_all(&path)
                .and_then(|()| {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(|e| failed(format!("cannot create {}: {e}", path.display())))?;
            Ok(path)
        }
        other => Err(Blocked::Unsupported(format!(
            "volume \"{name}\": hostPath type {other} is not supported by the devcluster's \
             kubelet (Directory and DirectoryOrCreate are)"
        ))),
    }
}

fn name_of(volume: &Value) -> &str {
    volume
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Fills `dir` with what `volume` holds.
fn write_volume(volume: &Value, dir: &Path, sources: &dyn Sources) -> Result<(), Blocked> {
    let name = name_of(volume);
    let failed = |why: String| {
        // pkg/kubelet/volumemanager/reconciler: "MountVolume.SetUp failed for volume %q : %v".
        Blocked::FailedMount(format!(
            "MountVolume.SetUp failed for volume \"{name}\" : {why}"
        ))
    };
    if volume.get("emptyDir").is_some() {
        return Ok(());
    }
    if let Some(source) = volume.get("configMap") {
        let files = keyed_files(source, "name", "configmap", |n| sources.config_map(n));
        return write_files(dir, files.map_err(failed)?, mode_of(source));
    }
    if let Some(source) = volume.get("secret") {
        let files = keyed_files(source, "secretName", "secret", |n| sources.secret(n));
        return write_files(dir, files.map_err(failed)?, mode_of(source));
    }
    if let Some(projected) = volume.get("projected") {
        let default_mode = mode_of(projected);
        let projections: &[Value] = projected
            .get("sources")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        for projection in projections {
            let files = if let Some(source) = projection.get("configMap") {
                keyed_files(source, "name", "configmap", |n| sources.config_map(n))
            } else if let Some(source) = projection.get("secret") {
                keyed_files(source, "name", "secret", |n| sources.secret(n))
            } else {
                continue;
            };
            write_files(dir, files.map_err(failed)?, default_mode)?;
        }
        return Ok(());
    }
    let kind = volume
        .as_object()
        .and_then(|v| v.keys().find(|k| *k != "name"))
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    Err(Blocked::Unsupported(format!(
        "volume \"{name}\": {kind} volumes are not supported by the devcluster's kubelet \
         (emptyDir, configMap, secret, persistentVolumeClaim, projected and hostPath are)"
    )))
}

/// A file to write: its path in the volume, content and mode (`None`: the volume's default).
type File = (String, Vec<u8>, Option<u32>);

/// The files of a ConfigMap or Secret source (`items`, else every key), or why not
/// (pkg/volume/configmap/configmap.go `MakePayload`: `configmap references non-existent config
/// key: KEY`; pkg/volume/secret/secret.go: `references non-existent secret key: KEY`).
fn keyed_files(
    source: &Value,
    name_field: &str,
    resource: &str,
    read: impl Fn(&str) -> Option<BTreeMap<String, Vec<u8>>>,
) -> Result<Vec<File>, String> {
    let name = source
        .get(name_field)
        .and_then(Value::as_str)
        .unwrap_or_default();
    let optional = source.get("optional").and_then(Value::as_bool) == Some(true);
    let Some(mut data) = read(name) else {
        return if optional {
            Ok(Vec::new())
        } else {
            Err(format!("{resource} \"{name}\" not found"))
        };
    };
    let Some(items) = source.get("items").and_then(Value::as_array) else {
        return Ok(data.into_iter().map(|(k, v)| (k, v, None)).collect());
    };
    let mut files = Vec::new();
    for item in items {
        let key = item.get("key").and_then(Value::as_str).unwrap_or_default();
        let path = item.get("path").and_then(Value::as_str).unwrap_or(key);
        let mode = item.get("mode").and_then(Value::as_u64).map(mode_bits);
        match data.remove(key) {
            Some(content) => files.push((path.to_string(), content, mode)),
            None if optional => {}
            None => {
                let what = if resource == "configmap" {
                    "configmap references non-existent config key"
                } else {
                    "references non-existent secret key"
                };
                return Err(format!("{what}: {key}"));
            }
        }
    }
    Ok(files)
}

fn mode_bits(mode: u64) -> u32 {
    u32::try_from(mode & 0o7777).unwrap_or(DEFAULT_MODE)
}

fn mode_of(source: &Value) -> u32 {
    source
        .get("defaultMode")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MODE, mode_bits)
}

fn write_files(dir: &Path, files: Vec<File>, default_mode: u32) -> Result<(), Blocked> {
    for (path, content, mode) in files {
        let relative = Path::new(&path);
        if path.is_empty()
            || !relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
        {
            // The API server's validation refuses such paths; a key is never one.
            return Err(Blocked::Unsupported(format!("invalid file path {path:?}")));
        }
        let file = dir.join(relative);
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, &content))
            .and_then(|()| {
                std::fs::set_permissions(
                    &file,
                    std::fs::Permissions::from_mode(mode.unwrap_or(default_mode)),
                )
            });
        written.map_err(|e| Blocked::Unsupported(format!("cannot write {path:?}: {e}")))?;
    }
    Ok(())
}

/// One volume in the container: `source` (a directory or file on the host) at `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    source: PathBuf,
    target: String,
    read_only: bool,
}

/// The container's process, run in its own user and mount namespace with its volumes mounted
/// and in its working directory.
pub(crate) struct Sandbox {
    mounts: Vec<Mount>,
    working_dir: String,
    /// The model of the container's own `/dev` ([`own_dev`]), where it needs one.
    dev_template: Option<PathBuf>,
    /// Where the setup leaves its reason for failing.
    error_file: PathBuf,
    /// Where the container's root is built (inside the namespace only).
    root_mount: PathBuf,
}

fn volume_mounts(container: &Value) -> &[Value] {
    container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn working_dir(container: &Value) -> Option<&str> {
    container
        .get("workingDir")
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty())
}

/// Whether `container` needs a sandbox for its own sake: it mounts volumes or has a working
/// directory.
pub(crate) fn wants_sandbox(container: &Value) -> bool {
    !volume_mounts(container).is_empty() || working_dir(container).is_some()
}

impl Sandbox {
    /// The sandbox of `container` (its `volumeMounts` and `workingDir`) and of its termination
    /// message file (`message_file`: the file on the host and the container's path for it,
    /// mounted last as the kubelet's `makeMounts` adds it), or `None` when it needs none:
    /// nothing mounted, no working directory and no message file. `Err`: why it cannot start.
    pub fn of(
        volumes: Option<&PodVolumes>,
        container: &Value,
        scratch: &Path,
        message_file: Option<(&Path, &str)>,
    ) -> Result<Option<Sandbox>, String> {
        let mounts = volume_mounts(container);
        let working_dir = working_dir(container);
        if !wants_sandbox(container) && message_file.is_none() {
            return Ok(None);
        }
        let Some(volumes) = volumes else {
            return Err("the pod's volumes are not set up".into());
        };
        let mut list = Vec::new();
        for mount in mounts {
            let name = name_of(mount);
            let target = mount
                .get("mountPath")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(dir) = volumes.volumes.get(name) else {
                return Err(format!("volume {name:?} is not one of the pod's volumes"));
            };
            let mut source = dir.clone();
            if let Some(sub) = mount
                .get("subPath")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if !Path::new(sub)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
                {
                    return Err(format!("invalid subPath {sub:?}"));
                }
                source = dir.join(sub);
                // The kubelet creates a missing subPath as a directory (pkg/volume/util/subpath).
                if !source.exists() {
                    std::fs::create_dir_all(&source)
                        .map_err(|e| format!("cannot create subPath {sub:?}: {e}"))?;
                }
            }
            list.push(Mount {
                source,
                target: absolute(target)?,
                read_only: mount.get("readOnly").and_then(Value::as_bool) == Some(true),
            });
        }
        if let Some((file, path)) = message_file {
            list.push(Mount {
                source: file.to_path_buf(),
                target: absolute(path).map_err(|why| format!("terminationMessagePath: {why}"))?,
                read_only: false,
            });
        }
        let working_dir = match working_dir {
            Some(dir) => absolute(dir)?,
            None => scratch.to_string_lossy().into_owned(),
        };
        // Nothing can be made in the host's /dev (an overlay over a devtmpfs is refused, a
        // copy of its hundred entries is slow): a mount point there that the host lacks (the
        // termination message file at /dev/termination-log) gets the container a /dev of its
        // own instead.
        let dev_template = if list
            .iter()
            .any(|m| m.target.starts_with("/dev/") && !Path::new(&m.target).exists())
        {
            let template = volumes.dir.join("dev");
            if !template.exists() {
                dev_template_at(&template)
                    .map_err(|e| format!("cannot make the container's /dev: {e}"))?;
            }
            Some(template)
        } else {
            None
        };
        Ok(Some(Sandbox {
            mounts: list,
            working_dir,
            dev_template,
            error_file: volumes.dir.join("start-error"),
            root_mount: volumes.dir.join("root"),
        }))
    }

    /// Where a path of the container is on the host, for finding its executable: inside a
    /// volume, that volume's directory; else the host's own path (the root is the host's).
    pub fn host_path(&self, path: &str) -> PathBuf {
        self.mounts
            .iter()
            .filter_map(|m| {
                let rest = Path::new(path).strip_prefix(&m.target).ok()?;
                Some((m.target.len(), m.source.join(rest)))
            })
            .max_by_key(|(depth, _)| *depth)
            .map_or_else(|| PathBuf::from(path), |(_, host)| host)
    }

    /// Gives `command` (the container's program and arguments) the sandbox, with `scratch`
    /// (the pod's `HOME`) visible at its own path: the process sets it up itself before it
    /// execs ([`sandbox_setup::enter`]).
    ///
    /// # Errors
    /// A path no system call takes (a NUL byte in it).
    pub fn enter(
        &self,
        command: &mut tokio::process::Command,
        scratch: &Path,
    ) -> Result<(), String> {
        let steps = setup_steps(
            &self.mounts,
            &self.working_dir,
            scratch,
            &self.root_mount,
            &host_entries(),
            self.dev_template.as_deref(),
        );
        sandbox_setup::enter(
            command,
            &steps,
            &self.root_mount.join("root"),
            &self.working_dir,
            &self.error_file,
        )
    }

    /// Where the container's process starts, in the sandbox.
    pub fn working_dir(&self) -> &str {
        &self.working_dir
    }

    /// The reason the setup failed, if it did (read once).
    pub fn start_error(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.error_file).ok()?;
        let _ = std::fs::remove_file(&self.error_file);
        Some(text)
    }
}

/// `path` as an absolute, normalised container path (`mountPath` and `workingDir` are absolute
/// in any container runtime).
fn absolute(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not an absolute path"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => return Err(format!("{path:?} may not contain '..'")),
            _ => {}
        }
    }
    if parts.is_empty() {
        return Err("a volume cannot be mounted at /".into());
    }
    Ok(format!("/{}", parts.join("/")))
}

/// An entry of the host's `/`: its name and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir(String),
    /// A symbolic link and its target (`bin -> usr/bin`).
    Link(String, String),
    File(String),
}

fn host_entries() -> Vec<Entry> {
    let Ok(dir) = std::fs::read_dir("/") else {
        return Vec::new();
    };
    let mut entries: Vec<Entry> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let kind = e.file_type().ok()?;
            Some(if kind.is_symlink() {
                let target = std::fs::read_link(e.path()).ok()?;
                Entry::Link(name, target.to_string_lossy().into_owned())
            } else if kind.is_dir() {
                Entry::Dir(name)
            } else {
                Entry::File(name)
            })
        })
        .collect();
    entries.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    entries
}

/// The devices of a container's own `/dev` (opencontainers/runtime-spec config-linux.md,
/// "Default Devices"), bound from the host's: a user namespace may not make device nodes.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Makes at `dir` the model of a container's own `/dev`: an empty file for each of the host's
/// [`DEVICES`] to bind it on, `pts` and `shm` to mount on, and the standard links
/// (runtime-linux.md, "Dev symbolic links", and `ptmx` into `pts`).
fn dev_template_at(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("pts"))?;
    std::fs::create_dir_all(dir.join("shm"))?;
    for device in DEVICES {
        if Path::new("/dev").join(device).exists() {
            std::fs::write(dir.join(device), "")?;
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        std::os::unix::fs::symlink(target, dir.join(name))?;
    }
    Ok(())
}

/// `path` (absolute, in the container) where it is while the root is built: under `root`.
fn in_root(root: &Path, path: &str) -> PathBuf {
    let mut joined = root.as_os_str().to_owned();
    joined.push(path);
    PathBuf::from(joined)
}

/// The steps that give the container its own `/dev`, as a container runtime makes one: an
/// overlay whose lower layer is `template` (see [`dev_template_at`]) and whose upper layer is
/// the pod's tmpfs (`dev-upper` and `dev-work`, made with the root), the host's devices bound
/// on their files, a `devpts` instance of its own and a `shm` tmpfs.
fn own_dev(template: &Path, root_mount: &Path, steps: &mut Vec<Step>) {
    let dev = root_mount.join("root/dev");
    steps.push(Step::Mount {
        fstype: "overlay",
        source: "devcluster-dev",
        target: dev.clone(),
        data: format!(
            "userxattr,lowerdir={},upperdir={},workdir={}",
            template.display(),
            root_mount.join("dev-upper").display(),
            root_mount.join("dev-work").display(),
        ),
        flags: MountFlags::empty(),
    });
    steps.extend(
        DEVICES
            .iter()
            .filter(|d| template.join(d).exists())
            .map(|d| Step::Bind {
                source: Path::new("/dev").join(d),
                target: dev.join(d),
                recursive: false,
            }),
    );
    steps.push(Step::Mount {
        fstype: "devpts",
        source: "devcluster-devpts",
        target: dev.join("pts"),
        data: "newinstance,ptmxmode=0666,mode=0620".into(),
        flags: MountFlags::empty(),
    });
    steps.push(Step::Mount {
        fstype: "tmpfs",
        source: "devcluster-shm",
        target: dev.join("shm"),
        data: "mode=1777".into(),
        flags: MountFlags::NOSUID | MountFlags::NODEV,
    });
}

/// The host directories whose kernel-backed contents stay as they are (not read-only).
const KERNEL_DIRS: [&str; 3] = ["proc", "sys", "dev"];

/// The steps that build the container's root under `root_mount` (see the module's
/// documentation). `entries` are the host's `/`.
fn setup_steps(
    mounts: &[Mount],
    working_dir: &str,
    scratch: &Path,
    root_mount: &Path,
    entries: &[Entry],
    dev_template: Option<&Path>,
) -> Vec<Step> {
    let root = root_mount.join("root");
    let mut steps = vec![
        Step::MkdirAll(root_mount.into()),
        Step::Mount {
            fstype: "tmpfs",
            source: "devcluster",
            target: root_mount.into(),
            data: "mode=0755".into(),
            flags: MountFlags::empty(),
        },
        Step::MkdirAll(root.clone()),
        Step::MkdirAll(root_mount.join("upper")),
        Step::MkdirAll(root_mount.join("work")),
    ];
    if dev_template.is_some() {
        steps.push(Step::MkdirAll(root_mount.join("dev-upper")));
        steps.push(Step::MkdirAll(root_mount.join("dev-work")));
    }
    let names: Vec<&str> = entries
        .iter()
        .map(|e| match e {
            Entry::Dir(n) | Entry::Link(n, _) | Entry::File(n) => n.as_str(),
        })
        .collect();
    let scratch = scratch.to_string_lossy().into_owned();
    let new_at_top = std::iter::once("/tmp".to_string())
        .chain(mounts.iter().map(|m| resolve_on_host(&m.target)))
        .chain([resolve_on_host(working_dir), resolve_on_host(&scratch)])
        .any(|path| {
            let top = path.split('/').nth(1).unwrap_or_default();
            !names.contains(&top)
        });
    if new_at_top {
        // A name to make at the top: the root is a tmpfs holding each of the host's entries.
        for entry in entries {
            entry_steps(entry, &root, &mut steps);
        }
    } else {
        // The host's whole root, read-only (the mounts below it as they are).
        steps.push(Step::Bind {
            source: "/".into(),
            target: root.clone(),
            recursive: true,
        });
        steps.push(Step::ReadOnly(root.clone()));
    }
    let mut places = Places::new(entries, root_mount);
    if names.contains(&"tmp") {
        places.overlay("/tmp", &mut steps);
    } else {
        steps.push(Step::MkdirAll(root.join("tmp")));
        places.private.push("/tmp".into());
    }
    if let Some(template) = dev_template {
        own_dev(template, root_mount, &mut steps);
        places.private.push("/dev".into());
    }
    let at = places.ensure(&scratch, true, &mut steps);
    steps.push(Step::Bind {
        source: scratch.into(),
        target: in_root(&root, &at),
        recursive: false,
    });
    // Shallow targets first, so a volume inside another's mount point lands in it.
    let mut ordered: Vec<&Mount> = mounts.iter().collect();
    ordered.sort_by_key(|m| m.target.matches('/').count());
    let mut read_only = Vec::new();
    for mount in &ordered {
        let at = places.ensure(&mount.target, mount.source.is_dir(), &mut steps);
        steps.push(Step::Bind {
            source: mount.source.clone(),
            target: in_root(&root, &at),
            recursive: false,
        });
        if mount.read_only {
            read_only.push(in_root(&root, &at));
        }
        places.private.push(at);
    }
    steps.extend(read_only.into_iter().map(Step::ReadOnly));
    places.ensure(working_dir, true, &mut steps);
    steps
}

/// The steps that put the host's top-level `entry` into the container's root: a link as it
/// is, a file or directory bound read-only (the kernel's as they are, and `/tmp`, which the
/// pod's overlay covers).
fn entry_steps(entry: &Entry, root: &Path, steps: &mut Vec<Step>) {
    match entry {
        Entry::Link(name, target) => steps.push(Step::Symlink {
            target: target.into(),
            at: root.join(name),
        }),
        Entry::File(name) => steps.extend([
            Step::Touch(root.join(name)),
            Step::Bind {
                source: Path::new("/").join(name),
                target: root.join(name),
                recursive: false,
            },
            Step::ReadOnly(root.join(name)),
        ]),
        Entry::Dir(name) => {
            steps.extend([
                Step::MkdirAll(root.join(name)),
                Step::Bind {
                    source: Path::new("/").join(name),
                    target: root.join(name),
                    recursive: true,
                },
            ]);
            if name != "tmp" && !KERNEL_DIRS.contains(&name.as_str()) {
                steps.push(Step::ReadOnly(root.join(name)));
            }
        }
    }
}

/// Where in the container's root new directories may be made without touching the host.
struct Places {
    /// Paths whose contents are the pod's own: `/tmp` (an overlay), names the root's tmpfs
    /// holds that the host's `/` has not, volumes, overlays.
    private: Vec<String>,
    /// Top-level names bound from the host.
    host: Vec<String>,
    overlays: usize,
    /// Where the root is built, its overlays' layers beside it.
    root_mount: PathBuf,
}

impl Places {
    fn new(entries: &[Entry], root_mount: &Path) -> Self {
        let host = entries
            .iter()
            .map(|e| match e {
                Entry::Dir(n) | Entry::Link(n, _) | Entry::File(n) => n.clone(),
            })
            .collect();
        Self {
            private: Vec::new(),
            host,
            overlays: 0,
            root_mount: root_mount.into(),
        }
    }

    fn root(&self) -> PathBuf {
        self.root_mount.join("root")
    }

    fn is_private(&self, path: &str) -> bool {
        self.private.iter().any(|p| Path::new(path).starts_with(p))
    }

    /// Makes sure `path` exists in the root (a directory, or an empty file when `!dir`),
    /// creating it (and its parents) where nothing is shared with the host; the path to mount
    /// on, with the host's symbolic links resolved (the setup runs outside the root, where an
    /// absolute link such as `/var/run -> /run` would lead to the host's own directory).
    fn ensure(&mut self, path: &str, dir: bool, steps: &mut Vec<Step>) -> String {
        let resolved;
        let path = if self.is_private(path) {
            path
        } else {
            resolved = resolve_on_host(path);
            resolved.as_str()
        };
        let top = path.split('/').nth(1).unwrap_or_default();
        let exists_on_host = Path::new(path).exists();
        if !self.is_private(path) && self.host.iter().any(|h| h == top) {
            if exists_on_host {
                return path.to_string();
            }
            // Missing below a host directory: overlay its nearest existing ancestor.
            let mut ancestor = Path::new(path);
            while let Some(parent) = ancestor.parent() {
                ancestor = parent;
                if ancestor.exists() {
                    break;
                }
            }
            let real = ancestor.to_string_lossy().into_owned();
            if !self.is_private(&real) {
                self.overlay(&real, steps);
            }
            self.make(path, dir, steps);
            return path.to_string();
        }
        if !self.is_private(path) {
            // A top-level name the host's `/` lacks: made in the root's own tmpfs.
            self.private.push(format!("/{top}"));
        }
        self.make(path, dir, steps);
        path.to_string()
    }

    /// Puts an overlay of the pod's over the host's directory `real` in the root: the host's
    /// files show through, what is made or written there is the pod's.
    fn overlay(&mut self, real: &str, steps: &mut Vec<Step>) {
        self.overlays += 1;
        let n = self.overlays;
        let (upper, work) = (
            self.root_mount.join(format!("upper/{n}")),
            self.root_mount.join(format!("work/{n}")),
        );
        let at = in_root(&self.root(), real);
        steps.push(Step::MkdirAll(upper.clone()));
        steps.push(Step::MkdirAll(work.clone()));
        steps.push(Step::OverlayOrShadow {
            host: real.into(),
            data: format!(
                "userxattr,lowerdir={},upperdir={},workdir={}",
                at.display(),
                upper.display(),
                work.display()
            ),
            at,
        });
        self.private.push(real.to_string());
    }

    fn make(&self, path: &str, dir: bool, steps: &mut Vec<Step>) {
        let at = in_root(&self.root(), path);
        if dir {
            steps.push(Step::MkdirAll(at));
        } else {
            if let Some(parent) = at.parent() {
                steps.push(Step::MkdirAll(parent.into()));
            }
            steps.push(Step::Touch(at));
        }
    }
}

/// `path` with the symbolic links of its longest existing prefix resolved on the host (whose
/// root the container's is).
fn resolve_on_host(path: &str) -> String {
    let mut existing = Path::new(path);
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return path.to_string(),
        }
    }
    let Ok(real) = std::fs::canonicalize(existing) else {
        return path.to_string();
    };
    let rest = Path::new(path)
        .strip_prefix(existing)
        .unwrap_or(Path::new(""));
    let joined = if rest.as_os_str().is_empty() {
        real
    } else {
        real.join(rest)
    };
    joined.to_string_lossy().into_owned()
}

/// Whether this machine lets an unprivileged process make a user and mount namespace (checked
/// once, by running `unshare --user --map-root-user --mount true`); `Err` says why not (the
/// kubelet adds what the pod therefore cannot have).
pub(crate) async fn available() -> Result<(), String> {
    static CHECKED: tokio::sync::OnceCell<Result<(), String>> = tokio::sync::OnceCell::const_new();
    CHECKED
        .get_or_init(|| async {
            let output = tokio::process::Command::new("unshare")
                .args(["--user", "--map-root-user", "--mount", "true"])
                .stdin(std::process::Stdio::null())
                .output()
                .await;
            let why = match output {
                Ok(out) if out.status.success() => return Ok(()),
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(error) => error.to_string(),
            };
            Err(format!(
                "this machine cannot give the pod's process a user and mount namespace \
                 (unshare --user --map-root-user --mount: {why})"
            ))
        })
        .await
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fake;

    impl Sources for Fake {
        fn config_map(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (name == "settings").then(|| {
                [("color", "blue"), ("size", "3")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect()
            })
        }
        fn secret(&self, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (name == "creds").then(|| [("user".to_string(), b"admin".to_vec())].into())
        }
        fn claim(&self, name: &str) -> Result<PathBuf, String> {
            Err(format!("persistentvolumeclaim \"{name}\" not found"))
        }
    }

    fn pod(volumes: Value) -> Value {
        json!({"metadata": {"uid": uuid::Uuid::new_v4().to_string()}, "spec": {"volumes": volumes}})
    }

    fn read(volumes: &PodVolumes, name: &str, file: &str) -> (String, u32) {
        let path = volumes.volumes[name].join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        (std::fs::read_to_string(path).unwrap(), mode)
    }

    #[test]
    fn configmaps_secrets_and_projections_become_files() {
        let host = VolumeHost::default();
        let made = materialise(
            &host,
            &pod(json!([
                {"name": "all", "configMap": {"name": "settings"}},
                {"name": "some", "configMap": {"name": "settings", "defaultMode": 0o600,
                 "items": [{"key": "color", "path": "nested/paint"},
                           {"key": "size", "path": "size", "mode": 0o400}]}},
                {"name": "sec", "secret": {"secretName": "creds"}},
                {"name": "both", "projected": {"sources": [
                    {"configMap": {"name": "settings", "items": [{"key": "color", "path": "c"}]}},
                    {"secret": {"name": "creds"}}]}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "absent", "configMap": {"name": "nope", "optional": true}},
            ])),
            &Fake,
        )
        .unwrap();
        assert_eq!(read(&made, "all", "color"), ("blue".into(), 0o644));
        assert_eq!(read(&made, "some", "nested/paint"), ("blue".into(), 0o600));
        assert_eq!(read(&made, "some", "size"), ("3".into(), 0o400));
        assert!(!made.volumes["some"].join("color").exists());
        assert_eq!(read(&made, "sec", "user"), ("admin".into(), 0o644));
        assert_eq!(read(&made, "both", "c").0, "blue");
        assert_eq!(read(&made, "both", "user").0, "admin");
        assert!(made.volumes["scratch"].is_dir());
        let dir = made.dir.clone();
        drop(made);
        assert!(!dir.exists(), "a pod's volumes go with it");
    }

    #[test]
    fn what_is_missing_holds_the_pod_as_the_kubelet_and_scheduler_say() {
        let host = VolumeHost::default();
        let blocked = |volumes: Value| materialise(&host, &pod(volumes), &Fake).err();
        assert_eq!(
            blocked(json!([{"name": "cfg", "configMap": {"name": "nope"}}])),
            Some(Blocked::FailedMount(
                "MountVolume.SetUp failed for volume \"cfg\" : configmap \"nope\" not found".into()
            ))
        );
        assert_eq!(
            blocked(json!([{"name": "s", "secret": {"secretName": "creds",
                             "items": [{"key": "password", "path": "p"}]}}])),
            Some(Blocked::FailedMount(
                "MountVolume.SetUp failed for volume \"s\" : references non-existent secret key: password"
                    .into()
            ))
        );
        assert_eq!(
            blocked(json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])),
            Some(Blocked::Unschedulable(
                "persistentvolumeclaim \"data\" not found".into()
            ))
        );
        assert_eq!(
            blocked(
                json!([{"name": "h", "hostPath": {"path": "/no/such/dir", "type": "Directory"}}])
            ),
            Some(Blocked::FailedMount(
                "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: \
                 /no/such/dir is not a directory"
                    .into()
            ))
        );
        assert!(matches!(
            blocked(json!([{"name": "h", "hostPath": {"path": "/etc/hosts", "type": "File"}}])),
            Some(Blocked::Unsupported(why)) if why.contains("hostPath type File is not supported")
        ));
        assert!(matches!(
            blocked(json!([{"name": "n", "nfs": {"server": "s", "path": "/"}}])),
            Some(Blocked::Unsupported(why)) if why.contains("nfs volumes are not supported")
        ));
    }

    /// A `hostPath` volume is the host's directory itself (made for `DirectoryOrCreate`), not a
    /// copy: what the pod writes there stays when the pod is gone.
    #[test]
    fn a_host_path_volume_is_the_hosts_directory_itself() {
        let host = VolumeHost::default();
        let outside = tempfile::tempdir().unwrap();
        let made_here = outside.path().join("made/here");
        let made = materialise(
            &host,
            &pod(json!([
                {"name": "store", "hostPath": {"path": outside.path(), "type": "Directory"}},
                {"name": "new", "hostPath": {"path": made_here, "type": "DirectoryOrCreate"}},
            ])),
            &Fake,
        )
        .unwrap();
        assert_eq!(made.volumes["store"], outside.path());
        assert_eq!(made.volumes["new"], made_here);
        let mode = std::fs::metadata(&made_here).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
        drop(made);
        assert!(made_here.is_dir(), "the host's directory outlives the pod");
    }

    /// The volume host, the pod's volumes (a configMap `cfg` and an emptyDir `work`) and the
    /// sandbox of a container with `mounts` (and `working_dir`).
    fn sandbox(
        mounts: Value,
        working_dir: Option<&str>,
    ) -> (VolumeHost, PodVolumes, Result<Option<Sandbox>, String>) {
        let host = VolumeHost::default();
        let made = materialise(
            &host,
            &pod(json!([{"name": "cfg", "configMap": {"name": "settings"}},
                        {"name": "work", "emptyDir": {}}])),
            &Fake,
        )
        .unwrap();
        let mut container = json!({"volumeMounts": mounts});
        if let Some(dir) = working_dir {
            container["workingDir"] = json!(dir);
        }
        let sandbox = Sandbox::of(Some(&made), &container, Path::new("/tmp/scratch"), None);
        (host, made, sandbox)
    }

    #[test]
    fn a_container_without_mounts_or_working_dir_needs_no_sandbox() {
        let made = None;
        assert!(matches!(
            Sandbox::of(made, &json!({"image": "x"}), Path::new("/tmp"), None),
            Ok(None)
        ));
    }

    #[test]
    fn container_paths_map_to_their_volume_on_the_host() {
        let (_host, made, sandbox) = sandbox(
            json!([{"name": "cfg", "mountPath": "/etc/settings/"},
                   {"name": "work", "mountPath": "/work", "subPath": "sub"}]),
            None,
        );
        let sandbox = sandbox.unwrap().unwrap();
        assert_eq!(
            sandbox.host_path("/etc/settings/run.sh"),
            made.volumes["cfg"].join("run.sh")
        );
        assert_eq!(
            sandbox.host_path("/work/x"),
            made.volumes["work"].join("sub/x")
        );
        assert!(made.volumes["work"].join("sub").is_dir(), "subPath made");
        assert_eq!(
            sandbox.host_path("/usr/bin/sh"),
            PathBuf::from("/usr/bin/sh")
        );
        assert_eq!(sandbox.working_dir, "/tmp/scratch");
    }

    #[test]
    fn bad_mounts_say_why() {
        for (mounts, why) in [
            (
                json!([{"name": "nope", "mountPath": "/x"}]),
                "not one of the pod's volumes",
            ),
            (
                json!([{"name": "cfg", "mountPath": "relative"}]),
                "not an absolute path",
            ),
            (
                json!([{"name": "cfg", "mountPath": "/a/../b"}]),
                "may not contain '..'",
            ),
            (
                json!([{"name": "cfg", "mountPath": "/"}]),
                "cannot be mounted at /",
            ),
            (
                json!([{"name": "cfg", "mountPath": "/x", "subPath": "../up"}]),
                "invalid subPath",
            ),
        ] {
            let (_host, _made, sandbox) = sandbox(mounts, None);
            let error = sandbox.err().unwrap_or_default();
            assert!(error.contains(why), "{error} lacks {why}");
        }
    }

    /// The steps as the commands that would do them, one a line.
    fn rendered(steps: &[Step]) -> Vec<String> {
        steps.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_setup_never_creates_on_the_host_what_it_mounts() {
        // The pod's scratch directory exists on the host, under its /tmp, as the kubelet's does.
        let scratch = tempfile::tempdir().unwrap();
        let entries = vec![
            Entry::Dir("etc".into()),
            Entry::Dir("proc".into()),
            Entry::Dir("tmp".into()),
            Entry::Link("bin".into(), "usr/bin".into()),
            Entry::File("marker".into()),
        ];
        let data = tempfile::tempdir().unwrap();
        let (cfg, work) = (data.path().join("cfg"), data.path().join("work"));
        std::fs::create_dir(&cfg).unwrap();
        std::fs::create_dir(&work).unwrap();
        let mounts = vec![
            Mount {
                source: cfg,
                target: "/etc/devcluster-test-missing/settings".into(),
                read_only: true,
            },
            Mount {
                source: work.clone(),
                target: "/workspace".into(),
                read_only: false,
            },
        ];
        let steps = setup_steps(
            &mounts,
            "/workspace/src",
            scratch.path(),
            Path::new("/data/pod/root"),
            &entries,
            None,
        );
        let lines = rendered(&steps);
        let has = |want: &str| {
            assert!(
                lines.iter().any(|l| l == want),
                "{want:?} not in {lines:#?}"
            )
        };
        // The host's root, read-only (the kernel's filesystems as they are), its /tmp under an
        // overlay of the pod's: the host's files show, what the pod writes is its own.
        has("mount --rbind /etc /data/pod/root/root/etc");
        has("mount -o remount,bind,ro /data/pod/root/root/etc");
        has("mount --rbind /proc /data/pod/root/root/proc");
        assert!(
            !lines.contains(&"mount -o remount,bind,ro /data/pod/root/root/proc".to_string()),
            "{lines:#?}"
        );
        has("mount --rbind /tmp /data/pod/root/root/tmp");
        has(
            "mount -t overlay -o userxattr,lowerdir=/data/pod/root/root/tmp,upperdir=/data/pod/root/upper/1,workdir=/data/pod/root/work/1 overlay /data/pod/root/root/tmp (else a copy of /tmp)",
        );
        has("ln -s usr/bin /data/pod/root/root/bin");
        has("touch /data/pod/root/root/marker");
        has("mount -o remount,bind,ro /data/pod/root/root/marker");
        // Missing under /etc: an overlay over /etc takes the new directory.
        has(
            "mount -t overlay -o userxattr,lowerdir=/data/pod/root/root/etc,upperdir=/data/pod/root/upper/2,workdir=/data/pod/root/work/2 overlay /data/pod/root/root/etc (else a copy of /etc)",
        );
        has("mkdir -p /data/pod/root/root/etc/devcluster-test-missing/settings");
        has("mount -o remount,bind,ro /data/pod/root/root/etc/devcluster-test-missing/settings");
        // Missing at the top: made in the root's own tmpfs; the working directory in the volume.
        has("mkdir -p /data/pod/root/root/workspace");
        has(&format!(
            "mount --bind {} /data/pod/root/root/workspace",
            work.display()
        ));
        // Over /tmp and /etc only.
        let overlays = steps
            .iter()
            .filter(|s| matches!(s, Step::OverlayOrShadow { .. }))
            .count();
        assert_eq!(overlays, 2, "{lines:#?}");
        assert_eq!(
            lines.last().map(String::as_str),
            Some("mkdir -p /data/pod/root/root/workspace/src")
        );
    }

    #[test]
    fn a_message_file_in_dev_gets_the_container_a_dev_of_its_own() {
        // The pod's scratch directory exists on the host, under its /tmp, as the kubelet's does.
        let scratch = tempfile::tempdir().unwrap();
        let host = VolumeHost::default();
        let made = PodVolumes::new(&host, "pod").unwrap();
        let file = made.dir().join("termination-x");
        std::fs::write(&file, "").unwrap();
        let container = json!({"image": "x"});
        let sandbox = |path: &str| {
            Sandbox::of(Some(&made), &container, scratch.path(), Some((&file, path)))
                .unwrap()
                .expect("a message file needs a sandbox")
        };
        let lines = |sandbox: &Sandbox| {
            rendered(&setup_steps(
                &sandbox.mounts,
                &sandbox.working_dir,
                scratch.path(),
                Path::new("/data/pod/root"),
                &[Entry::Dir("dev".into()), Entry::Dir("tmp".into())],
                sandbox.dev_template.as_deref(),
            ))
        };
        let in_dev = sandbox("/dev/termination-log");
        assert_eq!(in_dev.host_path("/dev/termination-log"), file);
        // The model of /dev: devices to bind on, mount points, the standard links.
        let template = in_dev.dev_template.clone().expect("a /dev of its own");
        assert!(template.join("null").is_file() && template.join("pts").is_dir());
        assert_eq!(
            std::fs::read_link(template.join("stdout")).unwrap(),
            Path::new("/proc/self/fd/1")
        );
        let text = lines(&in_dev);
        let has = |want: &str| assert!(text.iter().any(|l| l == want), "{want:?} not in {text:#?}");
        has("mkdir -p /data/pod/root/dev-upper");
        has("mkdir -p /data/pod/root/dev-work");
        has(&format!(
            "mount -t overlay -o userxattr,lowerdir={},upperdir=/data/pod/root/dev-upper,workdir=/data/pod/root/dev-work devcluster-dev /data/pod/root/root/dev",
            template.display()
        ));
        has("mount --bind /dev/null /data/pod/root/root/dev/null");
        has(
            "mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devcluster-devpts /data/pod/root/root/dev/pts",
        );
        has("mount -t tmpfs -o mode=1777,nosuid,nodev devcluster-shm /data/pod/root/root/dev/shm");
        // The file is made in that /dev and the message file bound on it.
        has("mkdir -p /data/pod/root/root/dev");
        has("touch /data/pod/root/root/dev/termination-log");
        has(&format!(
            "mount --bind {} /data/pod/root/root/dev/termination-log",
            file.display()
        ));
        // Neither an overlay over the host's /dev nor a copy of it.
        assert!(
            !text.iter().any(|l| l.contains("(else a copy of /dev)")),
            "{text:#?}"
        );

        // A path the host has, or one outside /dev, leaves /dev as it is.
        for path in ["/dev/null", "/tmp/out"] {
            let other = sandbox(path);
            assert_eq!(other.dev_template, None, "{path}");
            assert!(
                !lines(&other).iter().any(|l| l.contains("devcluster-dev")),
                "{path}"
            );
        }
    }

    #[test]
    fn without_a_new_top_level_name_the_root_is_the_hosts_whole() {
        // The pod's scratch directory exists on the host, under its /tmp, as the kubelet's does.
        let scratch = tempfile::tempdir().unwrap();
        let entries = vec![Entry::Dir("etc".into()), Entry::Dir("tmp".into())];
        let data = tempfile::tempdir().unwrap();
        let mounts = vec![Mount {
            source: data.path().into(),
            target: "/etc/devcluster-test-missing".into(),
            read_only: false,
        }];
        let lines = rendered(&setup_steps(
            &mounts,
            "/tmp/scratch",
            scratch.path(),
            Path::new("/data/pod/root"),
            &entries,
            None,
        ));
        for want in [
            "mount --rbind / /data/pod/root/root",
            "mount -o remount,bind,ro /data/pod/root/root",
            "mount -t overlay -o userxattr,lowerdir=/data/pod/root/root/tmp,upperdir=/data/pod/root/upper/1,workdir=/data/pod/root/work/1 overlay /data/pod/root/root/tmp (else a copy of /tmp)",
        ] {
            assert!(
                lines.iter().any(|l| l == want),
                "{want:?} not in {lines:#?}"
            );
        }
        assert!(
            !lines.iter().any(|l| l.contains("--rbind /etc")),
            "{lines:#?}"
        );
    }
}
