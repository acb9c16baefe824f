//! What a step hands the next beyond `key=value` outputs: a script (`source`), its standard
//! output (`outputs.result`), output parameters read from files, artifacts (files and
//! directories kept in an object store, or input files given in the spec), and the containers
//! around it (`initContainers`, `sidecars`). The step agent carries them out inside the step's
//! pod.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a workflow's artifacts are kept: an S3-compatible bucket or an OCI registry. Exactly
/// one of `s3` and `oci`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.s3) != has(self.oci)", "message": "name exactly one of s3 and oci"}]))]
pub struct ArtifactRepository {
    /// An S3-compatible bucket (AWS S3, MinIO, GCS's interoperability endpoint, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Repository>,
    /// An OCI registry: each artifact an OCI artifact of its own (ORAS's way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciRepository>,
}

/// The artifact repository a workflow uses, and where the operator found it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedRepository {
    /// `spec.artifactRepository`, `configmap/workflow-artifact-repository` (with its
    /// resourceVersion) or `--artifact-repository`.
    pub from: String,
    /// The repository.
    pub repository: ArtifactRepository,
}

/// An S3-compatible bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Repository {
    /// The service's URL, `https://...` or `http://...` (plain HTTP only when written so).
    #[schemars(length(min = 1))]
    pub endpoint: String,
    /// The bucket.
    #[schemars(length(min = 1))]
    pub bucket: String,
    /// The region; default `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// What every key starts with; `{{workflow.namespace}}` and `{{workflow.name}}` are filled
    /// in. Default `{{workflow.namespace}}/{{workflow.name}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// The Secret (in the workflow's namespace) holding `accessKey` and `secretKey`.
    pub credentials_secret: CredentialsSecret,
    /// Where the store keeps the bucket's objects as plain files (`DIR/BUCKET/KEY`), when every
    /// step runs on the machine that holds them: `workflow-operator dev` sets it for its
    /// embedded store. A step with artifacts gets the directory as a `hostPath` volume (type
    /// `Directory`) at the same path, and writes and reads its artifacts' bytes there, each
    /// upload still created and completed through the endpoint. Only for a store that keeps
    /// objects so (not MinIO). An absolute path without a `..` segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = HOST_DIRECTORY))]
    pub local_directory: Option<String>,
}

/// An absolute path none of whose segments is `..`, written without look-ahead (the API
/// server's patterns are RE2): each segment is empty, `.`, or starts otherwise than `..`, or is
/// `..` followed by more. Kubernetes refuses `..` in a `hostPath` volume's path
/// (`validatePathNoBacksteps` in pkg/apis/core/validation/validation.go), and a relative one
/// names no directory on the node.
const HOST_DIRECTORY: &str = r"^(/([^./][^/]*|\.|\.[^./][^/]*|\.\.[^/]+)?)+$";

impl ArtifactRepository {
    /// What makes this repository unusable, for the routes the CRD's schema does not check (the
    /// namespace's ConfigMap, `--artifact-repository`): not exactly one of `s3` and `oci`, or an
    /// `s3.localDirectory` that is not an absolute path without `..`.
    pub fn problem(&self) -> Option<String> {
        if self.s3.is_none() == self.oci.is_none() {
            return Some("name exactly one of s3 and oci".to_string());
        }
        let directory = self
            .s3
            .as_ref()
            .and_then(|s3| s3.local_directory.as_deref())?;
        let backstep = directory.split('/').any(|segment| segment == "..");
        (!directory.starts_with('/') || backstep).then(|| {
            format!(
                "s3.localDirectory {directory:?} is not an absolute path without a `..` segment"
            )
        })
    }
}

/// An OCI registry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciRepository {
    /// The registry's host (and port), e.g. `registry.local:5000`.
    #[schemars(length(min = 1))]
    pub registry: String,
    /// The repository artifacts are pushed to, e.g. `wf/artifacts`.
    #[schemars(length(min = 1))]
    pub repository: String,
    /// Plain HTTP instead of HTTPS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The Secret (in the workflow's namespace) holding `username` and `password`; absent:
    /// anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<CredentialsSecret>,
}

/// A Secret holding a repository's credentials, by name. Credentials are never in a spec, a
/// status or a log.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CredentialsSecret {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// When the operator deletes a workflow's artifacts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactGc {
    /// `OnWorkflowDeletion`, `OnWorkflowCompletion` or `Never` (the default).
    #[serde(default)]
    pub strategy: ArtifactGcStrategy,
}

/// See [`ArtifactGc`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ArtifactGcStrategy {
    /// Kept until deleted by hand.
    #[default]
    Never,
    /// Deleted when the workflow is deleted (a finalizer holds it until then).
    OnWorkflowDeletion,
    /// Deleted when the workflow ends, whatever its outcome.
    OnWorkflowCompletion,
}

/// What a step leaves for the steps after it, besides the `key=value` lines it writes to
/// `$WORKFLOW_OUTPUTS`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepOutputs {
    /// Parameters read from files once the command has succeeded:
    /// `{{steps.NAME.outputs.parameters.P}}` (or `{{steps.NAME.outputs.P}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<OutputParameter>,
    /// Files or directories kept in the artifact repository once the command has succeeded:
    /// `{{steps.NAME.outputs.artifacts.A}}` in a later step's input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<OutputArtifact>,
}

/// An output parameter: a file's content, a field of a resource step's object, a dag or steps
/// template's step's output, or a value given when a suspend step is resumed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputParameter {
    /// Its name: letters, digits, `_` and `-`, starting with a letter or `_`.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Where its value is read from.
    pub value_from: ValueFrom,
    /// The value when the file does not exist (a supplied one: when the resume gives none);
    /// absent: a missing file fails the step (a resume without the value is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// A supplied parameter's allowed values: a resume with another is refused; any value
    /// when empty.
    #[serde(default, rename = "enum", skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// What a supplied parameter asks the person who resumes the step for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Also a workflow output of this name, once the step succeeded: shown in
    /// `status.outputs.parameters` and read by later steps and exit steps as
    /// `{{workflow.outputs.parameters.NAME}}` (a step that reads it runs after this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub global_name: Option<String>,
}

/// Where an output parameter's value is read from: `path` for a step (or container
/// template), `jsonPath` for a resource step, `parameter` for a `dag` or `steps` template,
/// `supplied` for a suspend step. [`ValueFrom::source`] decides which.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueFrom {
    /// An absolute path in the step's container; its content, without a trailing newline.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 2))]
    pub path: String,
    /// A `dag` or `steps` template's output: `{{steps.X.outputs.parameters.Y}}` (or
    /// `{{tasks.X...}}`, `.outputs.result`) of one of its steps, which a caller reads as
    /// `{{steps.CALL.outputs.parameters.NAME}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    /// A resource step's output: a field of its object, as `kubectl get -o jsonpath=...`
    /// prints it (`{.metadata.name}`, `{.status.succeeded}`, `{.data['a.b']}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub json_path: Option<String>,
    /// A suspend step's output, `{}`: given by the person who resumes it
    /// (`workflow-operator resume NAME --step STEP --output NAME=VALUE`, Argo's `argo node set
    /// --output-parameter`), else its `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supplied: Option<Supplied>,
}

/// `valueFrom.supplied: {}`: the value is given when the step is resumed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Supplied {}

/// Where an output parameter's value comes from, as [`ValueFrom::source`] decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputSource<'a> {
    /// A file in the step's container (`path`).
    Path(&'a str),
    /// A field of a resource step's object (`jsonPath`).
    JsonPath(&'a str),
    /// A `dag` or `steps` template's step's output (`parameter`).
    Parameter(&'a str),
    /// Given when a suspend step is resumed (`supplied`).
    Supplied,
}

impl ValueFrom {
    /// Where the value comes from: the one place that reads which of the fields is set.
    ///
    /// # Errors
    /// None or several of them set, naming them.
    pub fn source(&self) -> Result<OutputSource<'_>, String> {
        let ValueFrom {
            path,
            parameter,
            json_path,
            supplied,
        } = self;
        let set: Vec<(&'static str, OutputSource<'_>)> = [
            (!path.is_empty()).then(|| ("path", OutputSource::Path(path))),
            (json_path.as_deref()).map(|p| ("jsonPath", OutputSource::JsonPath(p))),
            (parameter.as_deref()).map(|p| ("parameter", OutputSource::Parameter(p))),
            supplied.map(|_| ("supplied", OutputSource::Supplied)),
        ]
        .into_iter()
        .flatten()
        .collect();
        match set.as_slice() {
            [(_, source)] => Ok(*source),
            [] => {
                Err("valueFrom names no source: set path, jsonPath, parameter or supplied".into())
            }
            several => Err(format!(
                "valueFrom sets {}: set one",
                several
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(" and ")
            )),
        }
    }
}

/// An output artifact: a file or a directory, stored as a `.tar.gz`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputArtifact {
    /// Its name: letters, digits, `_` and `-`, starting with a letter or `_`.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// An absolute path in the step's container (a step's, or a container template's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 2))]
    pub path: String,
    /// A `dag` or `steps` template's output artifact: `{{steps.X.outputs.artifacts.A}}` (or
    /// `{{tasks.X...}}`) of one of its steps, which a caller takes as
    /// `{{steps.CALL.outputs.artifacts.NAME}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// A missing path is no failure: nothing is stored, and a step that takes it gets an empty
    /// directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Also a workflow output of this name: later steps and exit steps take it as
    /// `{{workflow.outputs.artifacts.NAME}}` (a step that takes it runs after this one), and
    /// `status.outputs.artifacts` names it once the step succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub global_name: Option<String>,
}

/// What a step takes in before its command runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepInputs {
    /// Artifacts of upstream steps, or files given here (`raw`), placed at their paths before
    /// the command runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<InputArtifact>,
}

/// An input artifact at a path of this step: an upstream step's output artifact (`from`), or
/// a file whose content is written here (`raw`, Argo's). Exactly one of the two
/// ([`InputArtifact::source`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputArtifact {
    /// Its name, for messages.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// An absolute path in the step's container: the file, or the directory, as it was stored.
    /// Taken from a step that fans out: a directory with one entry per item (`0`, `1`, ...).
    #[schemars(length(min = 2))]
    pub path: String,
    /// `{{steps.NAME.outputs.artifacts.A}}`: the artifact `A` of the upstream step `NAME`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub from: String,
    /// The file's content, given here: written at `path` (its missing parent directories
    /// made) before the command runs, with no artifact repository. At most 64 KiB for all of a
    /// step's raw input artifacts together, as JSON writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawArtifact>,
}

/// `raw`: an input artifact's content, given in the spec (Argo's `raw.data`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RawArtifact {
    /// The file's content, as text; `{{...}}` forms in it are filled as in a script
    /// (`source`).
    pub data: String,
}

/// The most bytes a step's raw input artifacts' data may take together, as JSON writes them
/// (a quote, a backslash or a newline takes two). They travel in the step agent's task, one
/// environment variable, which Linux limits to 128 KiB (`MAX_ARG_STRLEN`); half of it is left
/// for the rest of the task (a script, the other artifacts).
pub const MAX_RAW_BYTES: usize = 64 * 1024;

/// Where an input artifact comes from, as [`InputArtifact::source`] decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputSource<'a> {
    /// An upstream step's output artifact (`from`, as written).
    From(&'a str),
    /// The content given (`raw.data`).
    Raw(&'a str),
}

impl InputArtifact {
    /// Where the artifact comes from: the one place that reads which of `from` and `raw` is
    /// set. Both are part of what runs (through the step's `inputs`, which the incremental
    /// planner leaves to the full one, `fields::visit_step`).
    ///
    /// # Errors
    /// Neither or both set, saying so.
    pub fn source(&self) -> Result<InputSource<'_>, String> {
        let InputArtifact {
            name: _,
            path: _,
            from,
            raw,
        } = self;
        match (from.is_empty(), raw) {
            (false, None) => Ok(InputSource::From(from)),
            (true, Some(raw)) => Ok(InputSource::Raw(&raw.data)),
            (true, None) => Err(
                "names no source: set from (an upstream step's output artifact) \
                                 or raw (its content)"
                    .into(),
            ),
            (false, Some(_)) => Err("sets both from and raw: set one".into()),
        }
    }
}

/// The workflow's outputs (`status.outputs`): those its steps' outputs give with a
/// `globalName`, once the step that gives each succeeded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowOutputs {
    /// Each parameter: `{{workflow.outputs.parameters.NAME}}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<GlobalParameter>,
    /// Each artifact: `{{workflow.outputs.artifacts.NAME}}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<GlobalArtifact>,
}

impl WorkflowOutputs {
    /// Each output as the CLI's `get` and the web view show it, a name and what it is: a
    /// parameter's value, or which step's artifact.
    pub fn rows(&self) -> Vec<[String; 2]> {
        let parameters = (self.parameters.iter()).map(|p| [p.name.clone(), p.value.clone()]);
        let artifacts = (self.artifacts.iter()).map(|a| {
            [
                a.name.clone(),
                format!("artifact {} of step {}", a.artifact, a.step),
            ]
        });
        parameters.chain(artifacts).collect()
    }
}

/// A workflow output parameter and its value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct GlobalParameter {
    /// Its `globalName`.
    pub name: String,
    /// The value the step wrote.
    pub value: String,
}

/// A workflow output artifact: which step's artifact it is (`workflow-operator artifacts get`
/// fetches it by the two).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct GlobalArtifact {
    /// Its `globalName`.
    pub name: String,
    /// The step that stored it.
    pub step: String,
    /// The step's name for it (`outputs.artifacts[].name`).
    pub artifact: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_directory(directory: &str) -> ArtifactRepository {
        let s3 = S3Repository {
            local_directory: Some(directory.to_string()),
            ..S3Repository::default()
        };
        ArtifactRepository {
            s3: Some(s3),
            oci: None,
        }
    }

    /// The CRD's pattern (what the API server checks) and `problem` (what the ConfigMap and the
    /// flag are checked with) accept and refuse the same directories.
    #[test]
    fn a_local_directory_is_absolute_and_never_steps_back_by_the_schema_and_by_problem() {
        let pattern = regex::Regex::new(HOST_DIRECTORY).expect("pattern");
        let good = [
            "/",
            "/tmp/store",
            "/a/./b",
            "/a//b/",
            "/a/.b/..c/...",
            "/a/b..",
        ];
        let bad = [
            "",
            "tmp/store",
            "./x",
            "/a/../b",
            "/..",
            "/a/..",
            "..",
            "/a/b/../",
        ];
        for directory in good {
            assert!(
                pattern.is_match(directory),
                "{directory:?} refused by the pattern"
            );
            assert_eq!(with_directory(directory).problem(), None, "{directory:?}");
        }
        for directory in bad {
            assert!(
                !pattern.is_match(directory),
                "{directory:?} taken by the pattern"
            );
            let problem = with_directory(directory).problem().expect(directory);
            assert!(problem.contains("s3.localDirectory"), "{problem}");
        }
    }

    #[test]
    fn a_repository_names_exactly_one_store() {
        let neither = ArtifactRepository::default();
        assert_eq!(
            neither.problem().as_deref(),
            Some("name exactly one of s3 and oci")
        );
        let both = ArtifactRepository {
            oci: Some(OciRepository::default()),
            ..with_directory("/tmp")
        };
        assert_eq!(
            both.problem().as_deref(),
            Some("name exactly one of s3 and oci")
        );
    }
}
