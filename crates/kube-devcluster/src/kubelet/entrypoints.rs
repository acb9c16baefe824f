//! What a container without `command` runs. A real kubelet runs the image's ENTRYPOINT and CMD;
//! this control plane has no images, so it knows a few common images' defaults (and those the
//! user adds with `DevClusterOptions::entrypoints`) and refuses the rest with a reason.
//!
//! Kubernetes' rule (docs: "Define a Command and Arguments for a Container", and
//! pkg/kubelet/kuberuntime/helpers.go `ExpandContainerCommandAndArgs`): `command` replaces the
//! image's ENTRYPOINT and `args` its CMD; with `args` but no `command`, the image's ENTRYPOINT
//! runs with `args`. So for `busybox` (no ENTRYPOINT, CMD `sh`), `args: [sh, -c, "echo hi"]`
//! runs that shell, and no `args` runs `sh`.

use std::collections::HashMap;

/// An image's defaults: ENTRYPOINT and CMD.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entrypoint {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
}

/// hello-world's `/hello` prints this (github.com/docker-library/hello-world, `hello.c`).
const HELLO: &str = "
Hello from Docker!
This message shows that your installation appears to be working correctly.

To generate this message, Docker took the following steps:
 1. The Docker client contacted the Docker daemon.
 2. The Docker daemon pulled the \"hello-world\" image from the Docker Hub.
    (amd64)
 3. The Docker daemon created a new container from that image which runs the
    executable that produces the output you are currently reading.
 4. The Docker daemon streamed that output to the Docker client, which sent it
    to your terminal.

To try something more ambitious, you can run an Ubuntu container with:
 $ docker run -it ubuntu bash

Share images, workflows, and collaborate with the world at Docker Hub:
 https://hub.docker.com/

For more examples and ideas, visit:
 https://docs.docker.com/get-started/
";

/// The repository of an image reference, without registry, `library/`, tag or digest:
/// `docker.io/library/busybox:1.36` is `busybox`.
pub fn repository(image: &str) -> String {
    let image = image.split('@').next().unwrap_or(image);
    // A tag follows a `:` in the last path segment (a registry host may have a port).
    let (path, last) = match image.rfind('/') {
        Some(at) => (&image[..=at], &image[at + 1..]),
        None => ("", image),
    };
    let full = format!("{path}{}", last.split(':').next().unwrap_or(last));
    let mut parts: Vec<&str> = full.split('/').collect();
    if parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
    {
        parts.remove(0);
    }
    if parts.len() == 2 && parts[0] == "library" {
        parts.remove(0);
    }
    parts.join("/")
}

/// The built-in images' defaults (their Dockerfiles in github.com/docker-library).
fn builtin(repository: &str) -> Option<Entrypoint> {
    let cmd = |args: &[&str]| Entrypoint {
        entrypoint: Vec::new(),
        cmd: args.iter().map(|s| s.to_string()).collect(),
    };
    Some(match repository {
        "hello-world" => cmd(&["sh", "-c", &format!("printf '%s' '{HELLO}'")]),
        "busybox" | "alpine" => cmd(&["sh"]),
        "ubuntu" | "debian" => cmd(&["bash"]),
        "python" => cmd(&["python3"]),
        _ => return None,
    })
}

/// Parses `IMAGE=COMMAND` (the `--entrypoint` flag): the command split on whitespace, taken as
/// the image's ENTRYPOINT.
pub fn parse_mapping(text: &str) -> Result<(String, Vec<String>), String> {
    let (image, command) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not IMAGE=COMMAND"))?;
    let command: Vec<String> = command.split_whitespace().map(String::from).collect();
    if image.is_empty() || command.is_empty() {
        return Err(format!("{text:?} is not IMAGE=COMMAND"));
    }
    Ok((image.to_string(), command))
}

/// The argv a container runs: its `command` and `args` over its image's defaults. `Err` is the
/// reason it cannot run here (an image this control plane does not know, without `command`).
/// `extra` maps an image (as written, or its repository) to its ENTRYPOINT.
pub fn argv(
    image: &str,
    command: Vec<String>,
    args: Vec<String>,
    extra: &HashMap<String, Vec<String>>,
) -> Result<Vec<String>, String> {
    if !command.is_empty() {
        return Ok(command.into_iter().chain(args).collect());
    }
    let repository = repository(image);
    let known = extra
        .get(image)
        .or_else(|| extra.get(&repository))
        .map(|entrypoint| Entrypoint {
            entrypoint: entrypoint.clone(),
            cmd: Vec::new(),
        })
        .or_else(|| builtin(&repository));
    let Some(known) = known else {
        return Err(format!(
            "the devcluster cannot run the entrypoint of image {image:?} (it runs no images): \
             give the container a command, or name the image's entrypoint with \
             DevClusterOptions::entrypoints (`workflow-operator dev --entrypoint IMAGE=COMMAND`)"
        ));
    };
    let argv: Vec<String> = if args.is_empty() {
        known.entrypoint.into_iter().chain(known.cmd).collect()
    } else {
        known.entrypoint.into_iter().chain(args).collect()
    };
    if argv.is_empty() {
        return Err(format!("no command specified for image {image:?}"));
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn repositories_of_image_references() {
        for (image, repo) in [
            ("busybox", "busybox"),
            ("busybox:1.36", "busybox"),
            ("docker.io/library/busybox:1.36", "busybox"),
            ("library/alpine@sha256:abc", "alpine"),
            ("localhost:5000/team/tool:v1", "team/tool"),
            ("ghcr.io/org/app", "org/app"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }

    #[test]
    fn command_and_args_over_the_image_defaults() {
        let none = HashMap::new();
        assert_eq!(
            argv("nginx", strings(&["echo"]), strings(&["x"]), &none).unwrap(),
            strings(&["echo", "x"])
        );
        assert_eq!(
            argv("busybox:1.36", vec![], vec![], &none).unwrap(),
            strings(&["sh"])
        );
        assert_eq!(
            argv("busybox", vec![], strings(&["sh", "-c", "true"]), &none).unwrap(),
            strings(&["sh", "-c", "true"])
        );
        assert!(
            argv("nginx:1.27", vec![], vec![], &none)
                .unwrap_err()
                .contains("entrypoint")
        );
        let extra: HashMap<String, Vec<String>> =
            [("nginx".to_string(), strings(&["echo", "nginx"]))].into();
        assert_eq!(
            argv("nginx:1.27", vec![], strings(&["-g"]), &extra).unwrap(),
            strings(&["echo", "nginx", "-g"])
        );
        assert_eq!(
            parse_mapping("my/image=python3 -m app").unwrap(),
            ("my/image".to_string(), strings(&["python3", "-m", "app"]))
        );
        assert!(parse_mapping("nothing").is_err());
    }
}
