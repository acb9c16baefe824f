//! The step agent: a small program of the operator's image that runs a step's command inside
//! the step's pod when the step asks for more than a container gives, as Argo's emissary and
//! Tekton's entrypoint do. An init container copies it into an `emptyDir` ([`AGENT_DIR`]); the
//! step's container runs it with the step's command after `--`. Before the command it writes
//! the step's `source` (a script); after it, it reads the output parameters from their files,
//! keeps the standard output as `result`, and writes them all as one JSON [`Report`] where the
//! operator reads outputs (the termination message).
//!
//! This module is the pure part both sides share: which steps get the agent ([`needs_agent`]),
//! what it is told ([`Task`], in `$WORKFLOW_AGENT`) and what it answers ([`Report`]). A step
//! that needs none of it runs exactly as before, without the agent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::crd::artifacts::ArtifactRepository;
use crate::crd::{InputArtifact, InputSource, OutputParameter, OutputSource, Step, StepKind};
use crate::http_call::{self, HttpTask};
use crate::outputs::{MAX_OUTPUTS_BYTES, Outputs};
use crate::resource_action::{self, ResourceTask};

/// The `emptyDir` the agent is copied into, and where it keeps the script and outputs file.
pub const AGENT_DIR: &str = "/var/run/workflow-agent";

/// The agent's path in the step's container.
pub const AGENT_PATH: &str = "/var/run/workflow-agent/agent";

/// Where the agent writes the step's `source`.
pub const SCRIPT_PATH: &str = "/var/run/workflow-agent/script";

/// Where the agent points the command's `$WORKFLOW_OUTPUTS` (it reads the file afterwards).
pub const OUTPUTS_FILE: &str = "/var/run/workflow-agent/outputs";

/// The name of the agent's volume and of the init container that fills it.
pub const AGENT_VOLUME: &str = "workflow-agent";

/// The name of the `hostPath` volume of an artifact repository's `localDirectory`, mounted at
/// the same path in a step with artifacts.
pub const STORE_VOLUME: &str = "workflow-artifact-store";

/// The ConfigMap (in the workflow's namespace, key `repository`) naming the artifact
/// repository of workflows that set none.
pub const REPOSITORY_CONFIGMAP: &str = "workflow-artifact-repository";

/// The environment variable holding the agent's [`Task`] as JSON.
pub const TASK_ENV: &str = "WORKFLOW_AGENT";

/// The variable a step's pod has its own name in (the downward API's `metadata.name`): what
/// `{{pod.name}}` is filled from.
pub const POD_NAME_ENV: &str = "WORKFLOW_POD_NAME";

/// What `{{pod.name}}` becomes where the operator cannot know the name (a Job's pod is named
/// by the Job controller): Kubernetes' reference to [`POD_NAME_ENV`], which it expands in a
/// command, an argument and an env value; the agent expands it in its task ([`with_pod_name`]),
/// whose env value is passed literally.
pub const POD_NAME_REFERENCE: &str = "$(WORKFLOW_POD_NAME)";

/// The task `task` (as [`TASK_ENV`] holds it) with `{{pod.name}}`'s reference replaced by the
/// pod's name: a script, an HTTP request or a resource's manifest that names its pod. A pod's
/// name is a DNS subdomain (no quote, no backslash), so the JSON stays whole.
pub fn with_pod_name(task: &str, pod_name: &str) -> String {
    task.replace(POD_NAME_REFERENCE, pod_name)
}

/// An interactive step's command, as a shell would read it (each argument quoted as needed),
/// in its container's environment: what a person in its pod runs.
pub const COMMAND_ENV: &str = "WORKFLOW_COMMAND";

/// Where the agent of an interactive step writes a script running the step's command, which
/// records its exit code in [`LAST_EXIT_FILE`] (and, when the result is read, its standard
/// output in [`STDOUT_FILE`]).
pub const COMMAND_SCRIPT: &str = "/var/run/workflow-agent/command";

/// The exit code of the last run of [`COMMAND_SCRIPT`].
pub const LAST_EXIT_FILE: &str = "/var/run/workflow-agent/last-exit";

/// The standard output of the last run of [`COMMAND_SCRIPT`], when the step's result is read.
pub const STDOUT_FILE: &str = "/var/run/workflow-agent/stdout";

/// Written by `workflow-agent continue` (through `workflow-operator continue`): the exit code
/// an interactive step ends with.
pub const CONTINUE_FILE: &str = "/var/run/workflow-agent/continue";

/// The agent's command that makes an HTTP step's request (`workflow-agent http`).
pub const HTTP_VERB: &str = "http";

/// The agent's command that takes a resource step's action (`workflow-agent resource`).
pub const RESOURCE_VERB: &str = "resource";

/// The output key of the standard output: `{{steps.NAME.outputs.result}}`.
pub const RESULT: &str = "result";

/// The exit code of a step whose command succeeded but whose outputs the agent could not
/// collect (a missing file, outputs too large); its message says which.
pub const COLLECT_FAILED_EXIT: i32 = 1;

/// Where the operator finds the agent it copies into a pod: an image holding it, and its path
/// there (the operator's own image and executable directory, by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSource {
    /// The image of the init container that copies the agent.
    pub image: String,
    /// The agent's path in that image.
    pub path: String,
}

/// What the agent does around a step's command.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The script written to [`SCRIPT_PATH`] before the command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Keep the standard output as the output [`RESULT`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result: bool,
    /// Output parameters to read from files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterTask>,
    /// Artifacts to download before the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputTask>,
    /// Artifacts to upload after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<OutputTask>,
    /// Where artifacts are kept; its credentials are in [`ACCESS_KEY_ENV`] and
    /// [`SECRET_KEY_ENV`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreTask>,
    /// Wait for [`CONTINUE_FILE`] instead of running the command (an interactive step).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interactive: bool,
    /// Make this request instead of running a command (an HTTP step): its response body is
    /// the standard output a command would have written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTask>,
    /// Take this action on an object instead of running a command (a resource step): its
    /// outputs are read from the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceTask>,
}

/// The environment variable holding the artifact store's access key, or an OCI registry's user
/// name (from the repository's Secret; the agent keeps it from the step's command).
pub const ACCESS_KEY_ENV: &str = "WORKFLOW_ARTIFACT_ACCESS_KEY";

/// The environment variable holding the artifact store's secret key, or an OCI registry's
/// password.
pub const SECRET_KEY_ENV: &str = "WORKFLOW_ARTIFACT_SECRET_KEY";

/// The keys of an S3 repository's `credentialsSecret`: the access key, then the secret key.
pub const S3_SECRET_KEYS: [&str; 2] = ["accessKey", "secretKey"];

/// The keys of an OCI registry's `credentialsSecret`: the user name, then the password.
pub const OCI_SECRET_KEYS: [&str; 2] = ["username", "password"];

/// An input artifact to place at `path` before the command runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InputTask {
    /// Its name, for messages.
    pub name: String,
    /// Where it goes.
    pub path: String,
    /// Its key in the store; empty for an optional artifact its step did not make (an empty
    /// directory), for one taken from a step that fans out, and for a raw one.
    pub key: String,
    /// A raw artifact's content (filled in), written at `path`, its missing parent directories
    /// made: nothing is read from the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Taken from a step that fans out: the key of each item's artifact, in item order, each
    /// placed at `path/<index>` (an empty key: the item did not succeed, and has no entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<String>>,
    /// The output artifact is optional: an item's key missing from the store is an item that
    /// did not make it, and has no entry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// An output artifact to store once the command has succeeded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OutputTask {
    /// Its name: the output `artifacts.NAME`.
    pub name: String,
    /// The file or directory.
    pub path: String,
    /// Where it goes in the store.
    pub key: String,
    /// A missing path is no failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// The store artifacts go to, without its credentials.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum StoreTask {
    /// An S3-compatible bucket.
    S3(S3StoreTask),
    /// An OCI registry's repository; anonymous when the credentials' variables are unset.
    Oci(OciStoreTask),
}

/// An OCI registry's repository, without its credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OciStoreTask {
    /// The registry's host and port.
    pub registry: String,
    /// The repository.
    pub repository: String,
    /// Plain HTTP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

/// An S3-compatible store, without its credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct S3StoreTask {
    /// The service's URL.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The region.
    pub region: String,
    /// The directory holding the bucket's objects as files, when the store keeps them so on
    /// this machine (the repository's `localDirectory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_directory: Option<String>,
}

/// The key of output artifact `name` of the step instance whose Job is `job`, under the
/// repository's `prefix`: one per Job (so per run, retry, item and attempt), the same for
/// every try of that Job, so a repeated upload overwrites.
pub fn artifact_key(prefix: &str, job: &str, name: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        format!("{job}/{name}.tgz")
    } else {
        format!("{prefix}/{job}/{name}.tgz")
    }
}

/// The repository's key prefix for a workflow: its `keyPrefix` (default
/// `{{workflow.namespace}}/{{workflow.name}}`) with those two filled in.
pub fn key_prefix(template: Option<&str>, namespace: &str, workflow: &str) -> String {
    (template.unwrap_or("{{workflow.namespace}}/{{workflow.name}}"))
        .replace("{{workflow.namespace}}", namespace)
        .replace("{{workflow.name}}", workflow)
}

/// The key prefix of a workflow's artifacts in `repository`: an S3 bucket's
/// [`key_prefix`], `NAMESPACE/WORKFLOW` in an OCI registry (whose tags are derived from keys).
pub fn repository_prefix(
    repository: &ArtifactRepository,
    namespace: &str,
    workflow: &str,
) -> String {
    let template = repository
        .s3
        .as_ref()
        .and_then(|s3| s3.key_prefix.as_deref());
    key_prefix(template, namespace, workflow)
}

/// An output parameter to read: the file at `path`, or `default` when it does not exist.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ParameterTask {
    /// The output's key.
    pub name: String,
    /// The file.
    pub path: String,
    /// The value when the file does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// What the agent reports of a step whose command succeeded: its termination message, JSON.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every output: the `key=value` lines of `$WORKFLOW_OUTPUTS`, the parameters, `result`.
    pub outputs: Outputs,
}

impl Report {
    /// The report as its termination message.
    ///
    /// # Errors
    /// The message, when it would not fit in a termination message.
    pub fn to_message(&self) -> Result<String, String> {
        let message = serde_json::to_string(self).expect("a report serializes");
        if message.len() >= MAX_OUTPUTS_BYTES {
            let largest = (self.outputs.iter())
                .max_by_key(|(_, value)| value.len())
                .map(|(key, value)| format!(" (the largest, {key}, is {} bytes)", value.len()))
                .unwrap_or_default();
            return Err(format!(
                "the step's outputs take {} bytes{largest}, more than the {MAX_OUTPUTS_BYTES} \
                 bytes of a termination message: pass large values as an artifact \
                 (outputs.artifacts)",
                message.len()
            ));
        }
        Ok(message)
    }

    /// Reads a termination message the agent wrote; `None` when it is not one (a plain step's
    /// `key=value` lines, whose first key cannot start with `{`).
    pub fn from_message(message: &str) -> Option<Result<Report, String>> {
        let message = message.trim_start();
        message.starts_with('{').then(|| {
            serde_json::from_str(message)
                .map_err(|e| format!("its agent's report is not JSON: {e}"))
        })
    }
}

/// Whether `step`, of kind `kind`, runs under the agent: it is a script or interactive, has
/// output parameters or artifacts, input artifacts, or another step reads its `result`
/// (`result_read`).
pub fn needs_agent(step: &Step, kind: StepKind, result_read: bool) -> bool {
    let by_kind = match kind {
        StepKind::Container | StepKind::Suspend | StepKind::Fail => false,
        // The agent writes the script and runs it; it waits for the person; it makes the
        // request; it takes the action.
        StepKind::Script
        | StepKind::Interactive
        | StepKind::InteractiveScript
        | StepKind::Http
        | StepKind::Resource => true,
    };
    // A supplied output is given when a suspend step is resumed: nothing in a pod reads it.
    let outputs = step.outputs.as_deref().is_some_and(|o| {
        let read = |p: &OutputParameter| p.value_from.source() != Ok(OutputSource::Supplied);
        o.parameters.iter().any(read) || !o.artifacts.is_empty()
    });
    let inputs = step
        .inputs
        .as_deref()
        .is_some_and(|i| !i.artifacts.is_empty());
    by_kind || result_read || outputs || inputs
}

/// The agent's task for `step`, of kind `kind`.
pub fn task_of(step: &Step, kind: StepKind, result_read: bool) -> Task {
    let script = || step.source.as_deref().cloned();
    let (source, interactive) = match kind {
        StepKind::Container
        | StepKind::Suspend
        | StepKind::Fail
        | StepKind::Http
        | StepKind::Resource => (None, false),
        StepKind::Script => (script(), false),
        StepKind::Interactive => (None, true),
        StepKind::InteractiveScript => (script(), true),
    };
    // A resource step's outputs are read from its object, by its own task.
    let from_files = kind != StepKind::Resource;
    let parameters = (step.outputs.as_deref().filter(|_| from_files))
        .map(|o| {
            (o.parameters.iter())
                .map(|p| ParameterTask {
                    name: p.name.clone(),
                    path: p.value_from.path.clone(),
                    default: p.default.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Task {
        source,
        result: result_read,
        parameters,
        interactive,
        http: step.http.as_deref().map(http_call::task_of),
        resource: (step.resource.as_deref())
            .map(|r| resource_action::task_of(r, step.outputs.as_deref())),
        ..Task::default()
    }
}

/// Whether `step` needs an artifact repository: it has output artifacts, or input artifacts
/// other than raw ones (whose content is in its task).
pub fn needs_repository(step: &Step) -> bool {
    let outputs = step
        .outputs
        .as_deref()
        .is_some_and(|o| !o.artifacts.is_empty());
    let stored = |input: &InputArtifact| !matches!(input.source(), Ok(InputSource::Raw(_)));
    outputs
        || step
            .inputs
            .as_deref()
            .is_some_and(|i| i.artifacts.iter().any(stored))
}

/// What the agent runs for a step of kind `kind`: its command (`[sh]` for a script without
/// one) and, for a script, the script's path; the step's `args` follow.
pub fn step_command(command: Option<Vec<String>>, kind: StepKind) -> Vec<String> {
    let script = match kind {
        StepKind::Script | StepKind::InteractiveScript => true,
        StepKind::Container
        | StepKind::Interactive
        | StepKind::Suspend
        | StepKind::Fail
        | StepKind::Http
        | StepKind::Resource => false,
    };
    let command = match command {
        Some(command) => command,
        None if script => vec!["sh".to_string()],
        None => Vec::new(),
    };
    let path = script.then(|| SCRIPT_PATH.to_string());
    command.into_iter().chain(path).collect()
}

/// The command of a step's container under the agent: the agent, `--`, then
/// [`step_command`]; the step's `args` follow as the container's args. An HTTP step's is the
/// agent's `http`, a resource step's its `resource`: they run no command.
pub fn wrap_command(command: Option<Vec<String>>, kind: StepKind) -> Vec<String> {
    match kind {
        StepKind::Http => return vec![AGENT_PATH.to_string(), HTTP_VERB.to_string()],
        StepKind::Resource => return vec![AGENT_PATH.to_string(), RESOURCE_VERB.to_string()],
        StepKind::Container
        | StepKind::Script
        | StepKind::Interactive
        | StepKind::InteractiveScript
        | StepKind::Suspend
        | StepKind::Fail => {}
    }
    [AGENT_PATH.to_string(), "run".to_string(), "--".to_string()]
        .into_iter()
        .chain(step_command(command, kind))
        .collect()
}

/// `words` as one line a POSIX shell reads back as the same words: each quoted in `'...'`
/// unless it holds only characters no shell treats specially.
pub fn shell_line(words: &[String]) -> String {
    let quote = |word: &String| {
        let plain = !word.is_empty()
            && (word.chars()).all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', r"'\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The outputs named by [`Report`], merged in order: `lines` (the command's `key=value`
/// lines), then `parameters`, then the `result`.
pub fn merge_outputs(
    lines: Outputs,
    parameters: BTreeMap<String, String>,
    result: Option<String>,
) -> Outputs {
    let mut outputs = lines;
    outputs.extend(parameters);
    if let Some(result) = result {
        outputs.insert(RESULT.to_string(), result);
    }
    outputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{OutputParameter, StepOutputs, ValueFrom};
    use crate::testing::step;

    #[test]
    fn only_a_step_that_asks_for_it_gets_the_agent() {
        let plain = step("a", &[]);
        assert!(!needs_agent(&plain, StepKind::Container, false));
        assert!(
            needs_agent(&plain, StepKind::Container, true),
            "its result is read"
        );
        let interactive = StepKind::Interactive;
        assert!(needs_agent(&plain, interactive, false), "it is interactive");
        let mut script = plain.clone();
        script.source = Some(Box::new("echo hi".into()));
        assert!(needs_agent(&script, StepKind::Script, false));
        let mut declared = plain.clone();
        declared.outputs = Some(Box::new(StepOutputs {
            parameters: vec![OutputParameter {
                name: "sha".into(),
                value_from: ValueFrom {
                    path: "/tmp/sha".into(),
                    ..ValueFrom::default()
                },
                default: Some(String::new()),
                ..OutputParameter::default()
            }],
            artifacts: Vec::new(),
        }));
        assert!(needs_agent(&declared, StepKind::Container, false));
        let task = task_of(&declared, StepKind::Container, false);
        assert_eq!(task.parameters[0].path, "/tmp/sha");
        assert_eq!(task.parameters[0].default.as_deref(), Some(""));
        assert!(!task.result);
    }

    #[test]
    fn a_shell_line_reads_back_as_the_same_words() {
        let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(shell_line(&words(&["echo", "a/b.c"])), "echo a/b.c");
        assert_eq!(
            shell_line(&words(&["sh", "-c", "echo it's $HOME", ""])),
            r"sh -c 'echo it'\''s $HOME' ''"
        );
    }

    #[test]
    fn an_artifacts_key_is_one_per_job_under_the_workflows_prefix() {
        let prefix = key_prefix(None, "dev", "build");
        assert_eq!(prefix, "dev/build");
        assert_eq!(
            artifact_key(&prefix, "build-app-1a2b", "bin"),
            "dev/build/build-app-1a2b/bin.tgz"
        );
        let custom = key_prefix(Some("ci/{{workflow.name}}/"), "dev", "build");
        assert_eq!(artifact_key(&custom, "j", "x"), "ci/build/j/x.tgz");
        assert_eq!(artifact_key("", "j", "x"), "j/x.tgz");
    }

    #[test]
    fn a_script_runs_by_its_command_or_sh_with_its_path_last() {
        assert_eq!(
            wrap_command(None, StepKind::Script),
            [AGENT_PATH, "run", "--", "sh", SCRIPT_PATH]
        );
        assert_eq!(
            wrap_command(Some(vec!["python3".into(), "-u".into()]), StepKind::Script),
            [AGENT_PATH, "run", "--", "python3", "-u", SCRIPT_PATH]
        );
        assert_eq!(
            wrap_command(Some(vec!["echo".into()]), StepKind::Container),
            [AGENT_PATH, "run", "--", "echo"]
        );
    }

    #[test]
    fn a_report_is_json_a_plain_message_is_not_one() {
        let report = Report {
            outputs: merge_outputs(
                Outputs::from([("k".into(), "line".into())]),
                BTreeMap::from([("sha".into(), "abc".into())]),
                Some("two\nlines".into()),
            ),
        };
        let message = report.to_message().unwrap();
        assert_eq!(Report::from_message(&message), Some(Ok(report)));
        assert_eq!(Report::from_message("k=v\n"), None);
        assert!(matches!(Report::from_message("{oops"), Some(Err(_))));
    }

    #[test]
    fn a_report_too_large_for_a_termination_message_names_its_largest_output() {
        let report = Report {
            outputs: merge_outputs(Outputs::new(), BTreeMap::new(), Some("x".repeat(5000))),
        };
        let error = report.to_message().unwrap_err();
        assert!(
            error.contains("the largest, result, is 5000 bytes"),
            "{error}"
        );
        assert!(error.contains("artifact"), "{error}");
    }
}
