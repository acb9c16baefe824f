"""`dev()`: `workflow-operator dev` (the embedded control plane and the operator, in one
process) started for this program and stopped when it is done with it."""

from __future__ import annotations

import atexit
import collections
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from kubernetes import client as k8s

from ._client import Run, connect
from ._model import GROUP, VERSION
from ._workflow import Workflow, WorkflowTemplate
from .errors import DevClusterError

BIN_ENV = "WORKFLOW_OPERATOR_BIN"
KUBECONFIG_LINE = "export KUBECONFIG="


def find_binary(binary: str | None = None) -> str:
    """`binary`, else `$WORKFLOW_OPERATOR_BIN`, else `workflow-operator` on the PATH."""
    chosen = binary or os.environ.get(BIN_ENV)
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise DevClusterError(f"{chosen} (from {BIN_ENV} or binary=) is not an executable")
        return chosen
    found = shutil.which("workflow-operator")
    if found is None:
        raise DevClusterError(
            "workflow-operator is not on the PATH: install it, or set "
            f"{BIN_ENV} to the binary (cargo build puts it in target/debug/)"
        )
    return found


class DevCluster:
    """A running `workflow-operator dev`: submit workflows to it, stop it (`with` does)."""

    def __init__(
        self, binary: str | None = None, args: Sequence[str] = (), timeout: float = 60.0
    ) -> None:
        command = [find_binary(binary), "dev", "--web-addr", "off", *args]
        self._output: collections.deque[str] = collections.deque(maxlen=50)
        self._lines: queue.Queue[str | None] = queue.Queue()
        # A session of its own, so that stopping it reaches the steps it runs as processes.
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
        atexit.register(self.stop)
        try:
            self.kubeconfig = self._kubeconfig(timeout)
            self.api, _ = connect(self.kubeconfig)
            self._wait_for_crd(timeout)
        except BaseException:
            self.stop()
            raise

    def _drain(self, stream: IO[str]) -> None:
        # Read to the end, so that the process never blocks on a full pipe.
        for line in stream:
            self._output.append(line.rstrip("\n"))
            self._lines.put(line)
        self._lines.put(None)

    def _failed(self, why: str) -> DevClusterError:
        tail = "\n".join(self._output)
        return DevClusterError(f"workflow-operator dev {why}; its output:\n{tail}")

    def _kubeconfig(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                raise self._failed(f"printed no kubeconfig within {timeout:g}s") from None
            if line is None:
                raise self._failed(f"exited with code {self.process.wait()}")
            if line.startswith(KUBECONFIG_LINE):
                return line[len(KUBECONFIG_LINE) :].strip()

    def _wait_for_crd(self, timeout: float) -> None:
        objects = k8s.CustomObjectsApi(self.api)
        deadline = time.monotonic() + timeout
        while True:
            try:
                objects.list_namespaced_custom_object(GROUP, VERSION, "default", "workflows")
                return
            except k8s.ApiException:
                if self.process.poll() is not None:
                    raise self._failed(f"exited with code {self.process.returncode}") from None
                if time.monotonic() >= deadline:
                    raise self._failed(f"served no WorkFlows within {timeout:g}s") from None
                time.sleep(0.05)

    @property
    def output(self) -> str:
        """The last lines `dev` printed (a line per workflow status change)."""
        return "\n".join(self._output)

    def namespace(self, name: str) -> None:
        """Creates the namespace unless it exists."""
        core = k8s.CoreV1Api(self.api)
        try:
            core.read_namespace(name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise
            core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))

    def submit(
        self,
        workflow: Workflow,
        namespace: str = "default",
        parameters: Mapping[str, Any] | None = None,
    ) -> Run:
        """Submits `workflow` into `namespace` (created if need be)."""
        self.namespace(namespace)
        return workflow.submit(namespace, parameters=parameters, api=self.api)

    def apply(self, template: WorkflowTemplate, namespace: str = "default") -> None:
        """Creates or replaces a shared template."""
        self.namespace(namespace)
        template.apply(namespace, api=self.api)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (running steps are stopped, the artifact store removed), then SIGKILL."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                # Not yet reaped, so its pid is still its session's: end the steps with it.
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        atexit.unregister(self.stop)

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def dev(binary: str | None = None, args: Sequence[str] = (), timeout: float = 60.0) -> DevCluster:
    """Starts `workflow-operator dev` (`binary`, else `$WORKFLOW_OPERATOR_BIN`, else the PATH's)
    with `args`, and returns once it serves WorkFlows. Stop it with `with` or `.stop()`; it is
    stopped at exit otherwise."""
    return DevCluster(binary, args, timeout)
