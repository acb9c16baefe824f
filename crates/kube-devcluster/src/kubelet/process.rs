//! Starting a container's process: the program its `command` names, found on its `PATH` as exec
//! finds it (where the container sees it, in a sandbox), and the command that runs it, plain
//! or inside the pod's sandbox ([`crate::kubelet::volumes::Sandbox`]). Used by the pod runner
//! ([`crate::kubelet::runner`]).

use super::volumes::Sandbox;

/// The executable `name` stands for on `path` (the container's `PATH`, else the usual
/// default), as exec would find it, with `locate` giving where a container path is on the
/// host; a name with a `/` is taken as it is.
pub(super) fn resolve_program(
    name: &str,
    path: Option<&str>,
    locate: impl Fn(&str) -> std::path::PathBuf,
) -> Option<std::path::PathBuf> {
    if name.contains('/') {
        return Some(name.into());
    }
    let path = path.unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| format!("{}/{name}", dir.trim_end_matches('/')))
        .find(|candidate| is_executable(&locate(candidate)))
        .map(std::path::PathBuf::from)
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command that runs `argv` (with the container's `PATH`, `path`): the program itself, or
/// started inside the pod's `sandbox`, in the `scratch` directory.
///
/// # Errors
/// In a sandbox, a program the container would not find, as exec says it.
pub(super) fn command_for(
    argv: &[String],
    path: Option<&str>,
    sandbox: Option<&Sandbox>,
    scratch: &std::path::Path,
) -> Result<tokio::process::Command, String> {
    let Some(sandbox) = sandbox else {
        // An absolute program path lets the standard library use posix_spawn: with a bare
        // name and a PATH of the container's own, it falls back to fork, whose cost grows with
        // this process's memory (a 1 GB test process spent 30% of a 2,000-step run copying
        // page tables). Not found: spawn the bare name and report what exec says.
        let program = resolve_program(&argv[0], path, |p| p.into())
            .unwrap_or_else(|| std::path::PathBuf::from(&argv[0]));
        let mut command = tokio::process::Command::new(program);
        command.args(&argv[1..]);
        return Ok(command);
    };
    // The program is looked for where the container sees it (a volume's file at its mount
    // path): exec in the namespace would say "not found" only later, as the container's own
    // failure.
    let program = &argv[0];
    let found = if program.starts_with('/') {
        is_executable(&sandbox.host_path(program))
    } else {
        resolve_program(program, path, |p| sandbox.host_path(p)).is_some()
    };
    if !found {
        return Err(format!(
            "failed to start container process: exec: {:?}: executable file not found in $PATH",
            argv[0]
        ));
    }
    // The name is looked for on the container's PATH by exec, in the container's root.
    let mut command = tokio::process::Command::new(program);
    command.args(&argv[1..]);
    sandbox.enter(&mut command, scratch)?;
    Ok(command)
}

/// Why `program` did not start, as the container runtime says it.
pub(super) fn spawn_error(program: &str, error: &std::io::Error) -> String {
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "executable file not found in $PATH".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => error.to_string(),
    };
    format!("failed to start container process: exec: {program:?}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_on_the_path_as_exec_finds_them() {
        let host = |p: &str| std::path::PathBuf::from(p);
        let sh = resolve_program("sh", None, host).expect("sh is on the default PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{sh:?}");
        assert_eq!(resolve_program("./x", None, host), Some("./x".into()));
        assert_eq!(
            resolve_program("/bin/true", Some(""), host),
            Some("/bin/true".into())
        );
        assert_eq!(resolve_program("sh", Some("/nonexistent"), host), None);
        assert_eq!(resolve_program("no-such-program-here", None, host), None);
        // In a sandbox, where the container sees it: `/scripts/true` is the host's /bin/true.
        let sandboxed = |p: &str| match p.strip_prefix("/scripts/") {
            Some(rest) => std::path::Path::new("/bin").join(rest),
            None => p.into(),
        };
        assert_eq!(
            resolve_program("true", Some("/scripts"), sandboxed),
            Some("/scripts/true".into())
        );
        assert_eq!(
            resolve_program("no-such", Some("/scripts"), sandboxed),
            None
        );
    }
}
