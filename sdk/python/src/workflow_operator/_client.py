"""Submitting workflows with the official `kubernetes` client, and reading a run back: its phase
(the WorkFlow's status), its steps' logs and results (their pods)."""

from __future__ import annotations

import json
import os
import time
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from ._model import GROUP, VERSION
from .errors import NoResult, ResultNotJSON, WorkflowError, WorkflowTimeout

LABEL_WORKFLOW = "workflow.crd.com/workflow"
LABEL_RUN = "workflow.crd.com/run"
LABEL_ITEM = "workflow.crd.com/item"
LABEL_RUN_INDEX = "workflow.crd.com/run-index"
ANNOTATION_WORKFLOW = "workflow.crd.com/workflow"
ANNOTATION_STEP = "workflow.crd.com/step"
JOB = "job-name"
TERMINAL = ("Completed", "Failed")
PLURALS = {"WorkFlow": "workflows", "WorkFlowTemplate": "workflowtemplates"}


def connect(kubeconfig: str | None = None, context: str | None = None) -> tuple[Any, str]:
    """An API client as kubectl would make it (`KUBECONFIG`, else ~/.kube/config, else the
    pod's service account), and the context's namespace (else `default`)."""
    # Read now, not when the client was imported.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        # The client's config module has no annotations.
        api = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context
        )
        contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except k8s_config.ConfigException as error:
        if kubeconfig is not None or context is not None:
            raise WorkflowError(f"kubeconfig {kubeconfig or ''}: {error}") from None
        return _in_cluster(error)
    if context is not None:
        active = next(c for c in contexts if c["name"] == context)
    namespace = (active.get("context") or {}).get("namespace") or "default"
    return api, str(namespace)


def _in_cluster(kubeconfig_error: Exception) -> tuple[Any, str]:
    try:
        k8s_config.load_incluster_config()  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException as error:
        raise WorkflowError(
            f"no cluster to talk to: no kubeconfig ({kubeconfig_error}; set KUBECONFIG or pass "
            f"kubeconfig=), and not in a pod ({error})"
        ) from None
    with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
        return k8s.ApiClient(), f.read().strip()


def api_error(error: Exception, doing: str) -> WorkflowError:
    """The API server's refusal as an error that says what was being done and why."""
    body = getattr(error, "body", None)
    message = str(error)
    if body:
        try:
            message = json.loads(body).get("message", message)
        except ValueError:
            message = str(body)
    return WorkflowError(f"{doing}: {message}")


def create(api: Any, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Creates the object; the server's copy (with its generated name)."""
    plural = PLURALS[manifest["kind"]]
    objects = k8s.CustomObjectsApi(api)
    try:
        created = objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, manifest
        )
    except k8s.ApiException as error:
        what = manifest["metadata"].get("name") or manifest["metadata"].get("generateName")
        raise api_error(error, f"creating {manifest['kind']} {what} in {namespace}") from None
    return cast(dict[str, Any], created)


class Run:
    """A submitted workflow: wait for it, read its steps' logs and results."""

    def __init__(self, api: Any, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name

    def __repr__(self) -> str:
        return f"Run({self.namespace}/{self.name})"

    def get(self) -> dict[str, Any]:
        """The WorkFlow as the API server has it now."""
        objects = k8s.CustomObjectsApi(self.api)
        try:
            found = objects.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "workflows", self.name
            )
        except k8s.ApiException as error:
            raise api_error(error, f"reading workflow {self.namespace}/{self.name}") from None
        return cast(dict[str, Any], found)

    @property
    def phase(self) -> str | None:
        """`Created`, `Queued` (Kueue has not admitted the run), `Started`, `Suspended`,
        `Completed` or `Failed` (None before the operator saw it)."""
        return cast("str | None", (self.get().get("status") or {}).get("workflow-status"))

    @property
    def message(self) -> str | None:
        """Why the workflow is in its phase: a failure names the step and its cause."""
        return cast("str | None", (self.get().get("status") or {}).get("message"))

    def wait(self, timeout: float = 300.0, poll: float = 0.1) -> str:
        """Waits until the workflow is `Completed` or `Failed`, and says which.

        Raises WorkflowTimeout, naming the steps still running, after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.get().get("status") or {}
            phase = status.get("workflow-status")
            if phase in TERMINAL:
                return str(phase)
            if time.monotonic() >= deadline:
                raise WorkflowTimeout(self._timeout_message(status, timeout))
            time.sleep(poll)

    def _timeout_message(self, status: dict[str, Any], timeout: float) -> str:
        running = [
            f"{s['name']} ({s.get('phase')})"
            for s in status.get("steps") or []
            if s.get("phase") in ("Running", "Queued", "Interactive")
        ]
        running += [
            s for s in status.get("started") or [] if not any(r.startswith(s) for r in running)
        ]
        still = f"still running: {', '.join(running)}" if running else "no step is running"
        phase = status.get("workflow-status") or "not yet seen by the operator"
        return (
            f"workflow {self.namespace}/{self.name} did not finish within {timeout:g}s "
            f"(phase {phase}, progress {status.get('progress', '0/?')}); {still}"
        )

    def pods(self) -> list[Any]:
        """The current run's step pods, oldest first: the pods of the workflow's Jobs (its
        label holds the name, shortened when long; the Jobs' annotation holds it whole)."""
        selector = LABEL_WORKFLOW if len(self.name) > 63 else f"{LABEL_WORKFLOW}={self.name}"
        try:
            listed_jobs = k8s.BatchV1Api(self.api).list_namespaced_job(
                self.namespace, label_selector=selector
            )
            listed = k8s.CoreV1Api(self.api).list_namespaced_pod(
                self.namespace, label_selector=selector
            )
        except k8s.ApiException as error:
            raise api_error(error, f"listing the pods of {self.namespace}/{self.name}") from None
        run = (self.get().get("status") or {}).get("run")
        jobs = {
            job.metadata.name
            for job in list[Any](listed_jobs.items)
            if (job.metadata.annotations or {}).get(ANNOTATION_WORKFLOW) == self.name
            and (run is None or (job.metadata.labels or {}).get(LABEL_RUN) == run)
        }
        pods = [p for p in list[Any](listed.items) if (p.metadata.labels or {}).get(JOB) in jobs]
        return sorted(pods, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))

    def logs(self) -> dict[str, str]:
        """Each step's log, by step (an item as `step[2]`, a run of `spec.runs` as
        `run1/step`); a step tried more than once has its attempts one after the other."""
        core = k8s.CoreV1Api(self.api)
        logs: dict[str, str] = {}
        for pod in self.pods():
            container = pod.spec.containers[0].name
            try:
                text = core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container=container
                )
            except k8s.ApiException as error:
                text = f"(no log: {api_error(error, 'reading the log')})\n"
            key = instance_of(pod)
            logs[key] = logs.get(key, "") + text
        return logs

    def result(self, step: str) -> Any:
        """A step's result, decoded from JSON: a script's return value, a container's standard
        output; for a step that fans out, the list of its items' results (`step[2]`: one)."""
        for entry in (self.get().get("status") or {}).get("steps") or []:
            result = (entry.get("outputs") or {}).get("result")
            if entry.get("name") == step and result is not None:
                return decode(step, result)
        pods = [
            p
            for p in self.pods()
            if step in (step_of(p), instance_of(p)) and p.status.phase == "Succeeded"
        ]
        if not pods:
            raise NoResult(self._no_result(step))
        items = {instance_of(p): self._pod_result(step, p) for p in pods}
        if step not in items and any(LABEL_ITEM in (p.metadata.labels or {}) for p in pods):
            order = sorted(items, key=lambda k: int(k.rsplit("[", 1)[1].rstrip("]")))
            return [items[k] for k in order]
        return next(iter(items.values()))

    def _pod_result(self, step: str, pod: Any) -> Any:
        statuses = pod.status.container_statuses or []
        terminated = statuses[0].state.terminated if statuses else None
        message = (terminated.message or "") if terminated else ""
        if message.lstrip().startswith("{"):
            outputs = json.loads(message).get("outputs") or {}
            if "result" in outputs:
                return decode(step, outputs["result"])
        # A plain container step: its standard output is its log.
        core = k8s.CoreV1Api(self.api)
        container = pod.spec.containers[0].name
        text = core.read_namespaced_pod_log(pod.metadata.name, self.namespace, container=container)
        return decode(step, text.rstrip("\n"))

    def _no_result(self, step: str) -> str:
        status = self.get().get("status") or {}
        entries = {s.get("name"): s for s in status.get("steps") or []}
        if step in entries:
            entry = entries[step]
            why = f"it is {entry.get('phase')}" + (
                f": {entry['message']}" if entry.get("message") else ""
            )
        elif step in (status.get("executed") or []):
            why = "it succeeded, but its pod is gone (spec.podCleanup?)"
        else:
            why = f"it has not run (the workflow is {status.get('workflow-status')})"
        return f"workflow {self.namespace}/{self.name}: step {step!r} has no result: {why}"

    def delete(self) -> None:
        objects = k8s.CustomObjectsApi(self.api)
        objects.delete_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "workflows", self.name
        )


def step_of(pod: Any) -> str:
    return str((pod.metadata.annotations or {}).get(ANNOTATION_STEP, ""))


def instance_of(pod: Any) -> str:
    """The pod's step as `get` and `logs` name it: `step`, `step[2]`, `run1/step`."""
    labels = pod.metadata.labels or {}
    name = step_of(pod)
    if LABEL_ITEM in labels:
        name += f"[{labels[LABEL_ITEM]}]"
    if labels.get(LABEL_RUN_INDEX, "0") != "0":
        name = f"run{labels[LABEL_RUN_INDEX]}/{name}"
    return name


def decode(step: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        shown = text if len(text) <= 200 else text[:200] + "..."
        raise ResultNotJSON(
            f"step {step!r}'s result is not JSON: {shown!r}. A script's result is its return "
            "value; a container's is its standard output, which must then print JSON "
            "(run.logs() has the text as it is)"
        ) from None
