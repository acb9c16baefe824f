//! Where an artifact is kept in the bucket: a key made only of what names the step's attempt,
//! so the same attempt always writes the same key and a retried upload overwrites the first
//! instead of leaving a second copy. Pure; the operator (to delete a workflow's artifacts) and
//! the step agent (to put and get them) both call it.

/// The key prefix when the repository sets none.
pub const DEFAULT_KEY_PREFIX: &str = "{{workflow.namespace}}/{{workflow.name}}";

/// Which attempt of which step an artifact belongs to: the parts of its key besides the
/// repository's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactOwner<'a> {
    /// The workflow's namespace.
    pub namespace: &'a str,
    /// The workflow's name.
    pub workflow: &'a str,
    /// The run id (the Jobs' `workflow.crd.com/run` label).
    pub run: &'a str,
    /// The step's name.
    pub step: &'a str,
    /// The item's index, for a step that fans out.
    pub item: Option<usize>,
    /// The attempt: 0 for the first, 1 for the first retry (`retryStrategy`).
    pub attempt: u32,
}

/// `PREFIX/run-RUN/STEP[/item-N][/attempt-A]/NAME.tgz`, with `{{workflow.namespace}}` and
/// `{{workflow.name}}` of `prefix` (default [`DEFAULT_KEY_PREFIX`]) filled in. The first
/// attempt has no `attempt-` part, as its Job has no attempt label.
///
/// # Guarantees
/// The same arguments always give the same key; keys of different attempts, items, steps or
/// runs differ. No part of the key starts or ends with `/` twice: a prefix written with a
/// leading or trailing `/` gives the same key as without.
pub fn artifact_key(prefix: Option<&str>, owner: &ArtifactOwner<'_>, name: &str) -> String {
    let mut key = workflow_prefix(prefix, owner.namespace, owner.workflow);
    if !key.is_empty() {
        key.push('/');
    }
    key.push_str(&format!("run-{}/{}", owner.run, owner.step));
    if let Some(item) = owner.item {
        key.push_str(&format!("/item-{item}"));
    }
    if owner.attempt > 0 {
        key.push_str(&format!("/attempt-{}", owner.attempt));
    }
    key.push_str(&format!("/{name}.tgz"));
    key
}

/// The prefix under which all of one workflow's artifacts are kept (what its garbage collection
/// deletes): `prefix` (default [`DEFAULT_KEY_PREFIX`]) filled in, without a `/` at either end.
pub fn workflow_prefix(prefix: Option<&str>, namespace: &str, workflow: &str) -> String {
    prefix
        .unwrap_or(DEFAULT_KEY_PREFIX)
        .replace("{{workflow.namespace}}", namespace)
        .replace("{{workflow.name}}", workflow)
        .trim_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn owner(item: Option<usize>, attempt: u32) -> ArtifactOwner<'static> {
        ArtifactOwner {
            namespace: "team-a",
            workflow: "nightly",
            run: "4f2c9a1b",
            step: "build",
            item,
            attempt,
        }
    }

    #[rstest]
    #[case::first_attempt(None, None, 0, "team-a/nightly/run-4f2c9a1b/build/bin.tgz")]
    #[case::retry(None, None, 2, "team-a/nightly/run-4f2c9a1b/build/attempt-2/bin.tgz")]
    #[case::item(None, Some(3), 0, "team-a/nightly/run-4f2c9a1b/build/item-3/bin.tgz")]
    #[case::item_retried(
        None,
        Some(0),
        1,
        "team-a/nightly/run-4f2c9a1b/build/item-0/attempt-1/bin.tgz"
    )]
    #[case::own_prefix(
        Some("artifacts/{{workflow.name}}"),
        None,
        0,
        "artifacts/nightly/run-4f2c9a1b/build/bin.tgz"
    )]
    #[case::prefix_with_slashes(
        Some("/ci/{{workflow.namespace}}/"),
        None,
        0,
        "ci/team-a/run-4f2c9a1b/build/bin.tgz"
    )]
    #[case::empty_prefix(Some(""), None, 0, "run-4f2c9a1b/build/bin.tgz")]
    #[case::fixed_prefix(Some("shared"), None, 0, "shared/run-4f2c9a1b/build/bin.tgz")]
    fn keys_name_the_steps_attempt(
        #[case] prefix: Option<&str>,
        #[case] item: Option<usize>,
        #[case] attempt: u32,
        #[case] expected: &str,
    ) {
        assert_eq!(artifact_key(prefix, &owner(item, attempt), "bin"), expected);
    }

    #[test]
    fn the_same_attempt_always_gets_the_same_key_and_others_differ() {
        let key = |item, attempt| artifact_key(None, &owner(item, attempt), "bin");
        assert_eq!(key(Some(1), 1), key(Some(1), 1));
        let all = [
            key(None, 0),
            key(None, 1),
            key(Some(0), 0),
            key(Some(1), 0),
            key(Some(1), 1),
        ];
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }

    #[test]
    fn every_key_of_a_workflow_is_under_its_prefix() {
        let prefix = workflow_prefix(None, "team-a", "nightly");
        assert_eq!(prefix, "team-a/nightly");
        assert!(artifact_key(None, &owner(Some(2), 3), "bin").starts_with(&format!("{prefix}/")));
    }
}
