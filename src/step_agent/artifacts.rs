//! Artifacts around a step's command: its inputs downloaded before it runs, its outputs
//! uploaded once it succeeded, through the store the operator named (its credentials from the
//! environment, which the command does not get).

use std::collections::BTreeMap;
use std::path::Path;

use workflow_operator_core::agent::{ACCESS_KEY_ENV, InputTask, SECRET_KEY_ENV, StoreTask, Task};
use workflow_operator_core::outputs::ARTIFACT_PREFIX;

use super::chain;
use crate::artifacts::oci::OciTarget;
use crate::artifacts::{S3Target, Target};

/// Places each input artifact at its path (an optional one its step did not make: an empty
/// directory; a raw one: its content, with no store).
///
/// # Errors
/// Which input could not be had, and why.
pub async fn download(task: &Task) -> Result<(), String> {
    // Opened at the first input it holds: a step whose inputs are all raw has none.
    let mut opened: Option<Target> = None;
    for input in &task.inputs {
        if let Some(data) = &input.raw {
            write_raw(input, data)?;
            continue;
        }
        let target = match opened {
            Some(ref target) => target,
            None => opened.insert(target(task.store.as_ref())?),
        };
        let path = Path::new(&input.path);
        if let Some(items) = &input.items {
            download_items(target, input, items).await?;
            continue;
        }
        if input.key.is_empty() {
            make_dir(input)?;
            continue;
        }
        (target.get_path(&input.key, path))
            .await
            .map_err(|e| format!("input artifact {}: {}", input.name, chain(&e)))?;
    }
    Ok(())
}

/// Places the artifact of each item of a step that fans out at `PATH/<index>`, `PATH` a
/// directory made even when no item has one: an item that did not succeed (an empty key),
/// or did not make an optional artifact (its key not in the store), has no entry.
async fn download_items(
    target: &Target,
    input: &InputTask,
    items: &[String],
) -> Result<(), String> {
    let path = Path::new(&input.path);
    make_dir(input)?;
    for (index, key) in items.iter().enumerate() {
        if key.is_empty() {
            continue;
        }
        match target.get_path(key, &path.join(index.to_string())).await {
            Err(error) if error.is_not_found() && input.optional => {}
            result => result.map_err(|e| {
                format!("input artifact {}, item {index}: {}", input.name, chain(&e))
            })?,
        }
    }
    Ok(())
}

/// Writes a raw artifact's `data` at `input`'s path, making its missing parent directories (as
/// Argo's executor does).
fn write_raw(input: &InputTask, data: &str) -> Result<(), String> {
    let path = Path::new(&input.path);
    let failed = |doing: &str, e: std::io::Error| {
        format!("input artifact {}: {doing} {}: {e}", input.name, input.path)
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| failed("making the directory of", e))?;
    }
    std::fs::write(path, data).map_err(|e| failed("writing", e))
}

/// Makes `input`'s path a directory (with no entry, or one per item to come).
fn make_dir(input: &InputTask) -> Result<(), String> {
    std::fs::create_dir_all(&input.path)
        .map_err(|e| format!("input artifact {}: making {}: {e}", input.name, input.path))
}

/// Stores each output artifact; the outputs naming them (`artifacts.NAME`: the key, or empty
/// for an optional one that does not exist).
///
/// # Errors
/// Which output could not be stored, and why.
pub async fn upload(task: &Task) -> Result<BTreeMap<String, String>, String> {
    let mut outputs = BTreeMap::new();
    if task.artifacts.is_empty() {
        return Ok(outputs);
    }
    let target = target(task.store.as_ref())?;
    for output in &task.artifacts {
        let path = Path::new(&output.path);
        let key = if output.optional && !path.exists() {
            String::new()
        } else {
            (target.put_path(&output.key, path))
                .await
                .map_err(|e| format!("output artifact {}: {}", output.name, chain(&e)))?
                .key
        };
        outputs.insert(format!("{ARTIFACT_PREFIX}{}", output.name), key);
    }
    Ok(outputs)
}

/// The store, with the credentials from the agent's environment (an OCI registry without
/// them: anonymous).
fn target(store: Option<&StoreTask>) -> Result<Target, String> {
    let store = store.ok_or("the step has artifacts and the operator named no store")?;
    let credential = |name: &str| {
        std::env::var(name).map_err(|_| {
            format!("${name} is not set: the repository's credentials Secret was not given")
        })
    };
    Ok(match store {
        StoreTask::S3(s3) => Target::S3(S3Target {
            endpoint: s3.endpoint.clone(),
            bucket: s3.bucket.clone(),
            region: s3.region.clone(),
            access_key: credential(ACCESS_KEY_ENV)?,
            secret_key: credential(SECRET_KEY_ENV)?,
            local_directory: s3.local_directory.as_ref().map(Into::into),
        }),
        StoreTask::Oci(oci) => Target::Oci(OciTarget {
            registry: oci.registry.clone(),
            repository: oci.repository.clone(),
            insecure: oci.insecure,
            credentials: credential(ACCESS_KEY_ENV)
                .ok()
                .zip(credential(SECRET_KEY_ENV).ok()),
        }),
    })
}
