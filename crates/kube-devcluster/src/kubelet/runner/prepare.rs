//! What a pod needs before its containers run, and each container before it runs: the pod's
//! volumes ([`crate::kubelet::volumes`]), a container's argv ([`crate::kubelet::entrypoints`]),
//! its environment ([`crate::kubelet::pod_env`]) and whether it runs in a sandbox. Until they
//! can be made the pod, or the container, waits as a real one does, saying why in its status
//! and Events.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Ending, Runner};
use crate::kubelet::init_containers::Slot;
use crate::kubelet::status::{State, cannot_start, unscheduled_status};
use crate::kubelet::termination_message;
use crate::kubelet::volumes::{self, Blocked, PodVolumes};
use crate::kubelet::{CONFIG_RETRY, InNamespace, expand, field_ref, write_pod_status};
use crate::scheduler::filters::pre_filter_error;

/// A container ready to run ([`Runner::prepare`]).
pub(super) struct Prepared {
    pub container: Value,
    pub name: String,
    pub argv: Vec<String>,
    pub env: HashMap<String, String>,
    /// The pod's volumes (or its directory alone, for a sandbox), shared by its containers.
    pub volumes: Option<Arc<PodVolumes>>,
    /// It runs in a user and mount namespace of its own.
    pub sandboxed: bool,
    pub termination: termination_message::Spec,
}

impl Runner {
    /// What running the container at `slot` needs, once its env can be made: its argv with the
    /// env expanded, and whether it runs in a sandbox (for which the pod's directory is made
    /// in `volumes` if the pod has no volumes). `Err` when it cannot start (its state says why)
    /// or the pod went away meanwhile.
    pub(super) async fn prepare(
        &self,
        slot: Slot,
        container: &Value,
        volumes: &mut Option<Arc<PodVolumes>>,
    ) -> Result<Prepared, Ending> {
        let cannot = |why: String| {
            self.note(slot, |r| r.state = cannot_start(why));
            Ending::Finished
        };
        // Like an executable that is not there: the container cannot start.
        let argv = self.argv(container).map_err(cannot)?;
        let env = self
            .wait_for_env(slot, container)
            .await
            .ok_or(Ending::Gone)?;
        let argv: Vec<String> = argv.iter().map(|a| expand(a, &env)).collect();
        let termination = termination_message::Spec::of(container);
        // The sandbox: for the container's volumes and working directory, and for its
        // termination message file when the process is told where that is (the module
        // documentation of `termination_message` says why only then).
        let needs_mounts = volumes::wants_sandbox(container);
        let sandboxed = needs_mounts || termination.is_told(&argv, env.values());
        if sandboxed && let Err(why) = volumes::available().await {
            let what = if needs_mounts {
                "mount its volumes".to_string()
            } else {
                format!("give it its terminationMessagePath {:?}", termination.path)
            };
            return Err(cannot(format!("{why}, so the devcluster cannot {what}")));
        }
        if sandboxed && volumes.is_none() {
            // A pod without volumes still needs its own directory for a sandbox.
            let made = PodVolumes::new(&self.shared.volumes, self.pod.uid()).map_err(cannot)?;
            *volumes = Some(Arc::new(made));
        }
        let name = container.get("name").and_then(Value::as_str);
        Ok(Prepared {
            container: container.clone(),
            name: name.unwrap_or_default().to_string(),
            argv,
            env,
            volumes: volumes.clone(),
            sandboxed,
            termination,
        })
    }

    /// The pod's volumes (`None` when it has none), once they can be made; meanwhile the pod
    /// waits, unscheduled or with its containers waiting to be created, and the scheduler's or
    /// the kubelet's Event says why. `Err(None)`: the pod was deleted (or the kubelet stopped)
    /// first; `Err(Some(why))`: it can never run here.
    pub(super) async fn wait_for_volumes(&self) -> Result<Option<PodVolumes>, Option<String>> {
        let has_volumes = (self.pod.value)
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .is_some_and(|v| !v.is_empty());
        if !has_volumes {
            return Ok(None);
        }
        loop {
            let sources = InNamespace(&self.sources, self.pod.namespace(), &self.shared.volumes);
            let written =
                match volumes::materialise(&self.shared.volumes, &self.pod.value, &sources) {
                    Ok(made) => return Ok(Some(made)),
                    Err(Blocked::Unsupported(why)) => return Err(Some(why)),
                    Err(Blocked::Unschedulable(why)) => {
                        // The VolumeBinding PreFilter plugin's message, in the scheduler's words.
                        let message = pre_filter_error(&why);
                        self.events
                            .scheduler
                            .warn(&self.pod, "FailedScheduling", &message);
                        write_pod_status(&self.store, &self.info, &self.pod, |_| {
                            unscheduled_status(&message)
                        })
                    }
                    Err(Blocked::FailedMount(message)) => {
                        // No container is created yet: each waits as it does by default
                        // (`ContainerCreating`, or `PodInitializing` behind init containers).
                        self.events.kubelet.warn(&self.pod, "FailedMount", &message);
                        self.publish(false)
                    }
                };
            if !written || !self.wait(CONFIG_RETRY).await {
                return Err(None);
            }
        }
    }

    /// Sleeps for `delay`; false when the pod is deleted (or the kubelet stops) first.
    async fn wait(&self, delay: std::time::Duration) -> bool {
        let mut terminating = self.terminating.clone();
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = self.cancel.cancelled() => false,
            _ = terminating.wait_for(Option::is_some) => false,
        }
    }

    /// The container's environment, once every ConfigMap and Secret it needs exists; meanwhile
    /// the container waits with reason `CreateContainerConfigError`. `None`: the pod was
    /// deleted (or the kubelet stopped) first.
    async fn wait_for_env(&self, slot: Slot, container: &Value) -> Option<HashMap<String, String>> {
        loop {
            let message = match self.env(container) {
                Ok(env) => return Some(env),
                Err(message) => message,
            };
            // pkg/kubelet/kuberuntime/kuberuntime_container.go (startContainer): a failed
            // generateContainerConfig is reported as ErrCreateContainerConfig,
            // "CreateContainerConfigError", with the error's message.
            let waiting = State::Waiting {
                reason: "CreateContainerConfigError".into(),
                message,
            };
            if !self.set(slot, |r| r.state = waiting) || !self.wait(CONFIG_RETRY).await {
                return None;
            }
        }
    }

    /// What the container runs: its `command` and `args` over its image's defaults.
    fn argv(&self, container: &Value) -> Result<Vec<String>, String> {
        let strings = |field: &str| -> Vec<String> {
            container
                .get(field)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let image = container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let extra = self
            .shared
            .entrypoints
            .lock()
            .expect("kubelet lock poisoned")
            .clone();
        crate::kubelet::entrypoints::argv(image, strings("command"), strings("args"), &extra)
    }

    /// `PATH`, `HOME` (the scratch directory, set later), `HOSTNAME`, then the container's
    /// `envFrom` and `env` ([`crate::kubelet::pod_env`]); `Err` is the kubelet's message for a
    /// missing ConfigMap, Secret or key.
    fn env(&self, container: &Value) -> Result<HashMap<String, String>, String> {
        let mut env = HashMap::new();
        env.insert(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            }),
        );
        env.insert("HOSTNAME".to_string(), self.pod.name().to_string());
        // A real cluster's pod reaches the API server with its service account's token,
        // mounted unless `automountServiceAccountToken: false`; a local process reads a
        // kubeconfig instead, the pod's own (with its token) when the API server authenticates,
        // else the control plane's (the container's own env may name another).
        let automount = self.pod.value.pointer("/spec/automountServiceAccountToken");
        if automount != Some(&Value::Bool(false))
            && let Some(path) = self.shared.kubeconfig_for(&self.pod)?
        {
            env.insert(
                crate::kubelet::KUBECONFIG_ENV.to_string(),
                path.to_string_lossy().into_owned(),
            );
        }
        // The pod as stored now: labels and annotations may have changed since it was created.
        let pod = self
            .store
            .get(&self.info, self.pod.namespace(), self.pod.name())
            .ok()
            .filter(|p| p.uid() == self.pod.uid())
            .map_or_else(|| self.pod.value.clone(), |p| p.value.clone());
        crate::kubelet::pod_env::resolve(
            &pod,
            container,
            &InNamespace(&self.sources, self.pod.namespace(), &self.shared.volumes),
            |path| field_ref(&pod, path),
            &mut env,
        )?;
        Ok(env)
    }
}
