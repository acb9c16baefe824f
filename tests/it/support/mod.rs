//! Shared fixtures of the operator's integration and reliability tests (`tests/operator_*.rs`,
//! `tests/reliability_*.rs`), pytest-style, on rstest:
//!
//! - [`cluster`]: the embedded control plane with the WorkFlow CRD installed, or, when
//!   `WORKFLOW_TEST_CLUSTER=kube` is set, the cluster of the current kubeconfig (where the CRD
//!   and the operator are assumed installed); [`rbac_cluster`], [`rbac_namespace`] and
//!   [`rbac_operator`] the same with the control plane's RBAC on;
//! - [`namespace`]: a fresh namespace per test, deleted afterwards;
//! - [`operator`] / [`operator_process`]: our operator running against the cluster, as a tokio
//!   task or as a separate OS process (the built binary), stoppable, killable and restartable;
//!   a no-op on a real cluster, where the installed operator runs;
//! - waits that watch for a condition with a deadline and fail naming what was awaited and the
//!   last state seen ([`wait_for`], [`wait_list`], [`Namespace::wait_terminal`]), and
//!   [`holds_for`], which watches that a condition stays true for a while;
//! - [`JobRecorder`]: every Job and pod that ever existed in a namespace, to prove no step ran
//!   twice;
//! - [`Shape`]: workflows of mixed shapes with their expected outcomes.
//! - [`dev_process::start_dev`]: `workflow-operator dev` as a process, and a client of it;
//! - [`session::Session`]: a user's kubectl session on the embedded control plane with the
//!   operator running, and the `workflow-operator` CLI pointed at it.
//!
//! Each part is a file (`test_cluster`, `status_read`, `waits`, `operator_run`, `recorder`,
//! `session`, `queueing`), re-exported here so tests name them `support::NAME`.
//!
//! Tests reach the cluster only through the Kubernetes API, so the same files run on kind. Only
//! fault injection ([`Cluster::dev`]) needs the embedded control plane; tests that use it, or
//! stop the operator, skip themselves on a real cluster.
#![allow(dead_code)]

pub mod dev_process;
pub mod kueue;
pub mod queueing;
pub mod session;

mod test_cluster;
pub use test_cluster::*;
mod status_read;
pub use status_read::*;
mod waits;
pub use waits::*;
mod operator_run;
pub use operator_run::*;
mod recorder;
pub use recorder::*;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace as CoreNamespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use kube_devcluster::{DevCluster, DevClusterOptions};
use rstest::fixture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use workflow_operator::controllers::workflow::operator::{
    self as workflow_operator_mod, OperatorOptions,
};
use workflow_operator_core::WorkFlow;
use workflow_operator_core::jobs::{
    ANNOTATION_STEP, ANNOTATION_WORKFLOW, LABEL_ATTEMPT, LABEL_ITEM, LABEL_RETRY, LABEL_RUN,
    LABEL_RUN_INDEX,
};
use workflow_operator_core::lifecycle::Phase;
use workflow_operator_core::testing::WorkFlowBuilder;

/// How long a wait may take unless a test says otherwise: generous, because the 2-core build
/// machine runs several tests (each with its processes) at once.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The operator's CRDs, generated once for the many control planes a test binary starts: in a
/// debug build, generating them took tens of milliseconds of CPU in every test's fixture.
pub static CRDS: LazyLock<Vec<CustomResourceDefinition>> =
    LazyLock::new(workflow_operator_core::crd::crds);

/// `text` in a file of its own, named `.yaml`: a manifest the CLI reads as a user's file.
pub fn yaml_file(text: &str) -> tempfile::NamedTempFile {
    use std::io::Write as _;
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

/// The environment variable that selects a real cluster (`kube`) instead of the embedded one.
pub const CLUSTER_ENV: &str = "WORKFLOW_TEST_CLUSTER";

/// Label on every namespace the tests create, so leftovers on a real cluster can be found.
pub const TEST_LABEL: &str = "workflow-operator-test";

/// Skips the rest of a test that needs the embedded control plane or an operator it controls.
#[macro_export]
macro_rules! skip_on_real_cluster {
    ($why:expr) => {
        if $crate::support::Cluster::is_real() {
            eprintln!("skipped on a real cluster: {}", $why);
            return;
        }
    };
}
