"""`Workflow` and `WorkflowTemplate`: what a user builds, submits and applies."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ._client import Run, api_error, connect, create
from ._model import GROUP, VERSION, Holder
from ._refs import json_text


class Workflow(Holder):
    """A WorkFlow. Steps called inside its `with` block are its steps.

    `workflow_template`: run that shared template (a `WorkflowTemplate` or its name) whole,
    `parameters` setting its parameters. `spec`: more spec fields as the manifest writes them
    (`parallelism`, `maxStepTimeout`, `podTemplate`, ...)."""

    kind = "WorkFlow"

    def __init__(
        self,
        name: str | None = None,
        *,
        generate_name: str | None = None,
        namespace: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        workflow_template: WorkflowTemplate | str | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            name,
            generate_name=generate_name,
            namespace=namespace,
            parameters=parameters,
            labels=labels,
            spec=spec,
        )
        if workflow_template is not None:
            ref = (
                workflow_template if isinstance(workflow_template, str) else workflow_template.name
            )
            self.spec["workflowTemplateRef"] = {"name": ref}

    def submit(
        self,
        namespace: str | None = None,
        *,
        parameters: Mapping[str, Any] | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        api: Any = None,
    ) -> Run:
        """Creates the workflow (kubeconfig and context as kubectl finds them, unless given);
        `parameters` override its parameters' values, as `submit -p` does."""
        if api is None:
            api, default_namespace = connect(kubeconfig, context)
        else:
            default_namespace = "default"
        namespace = namespace or self.namespace or default_namespace
        manifest = self.to_manifest()
        manifest["metadata"].pop("namespace", None)
        if parameters:
            _set_parameters(manifest, parameters)
        created = create(api, namespace, manifest)
        return Run(api, namespace, created["metadata"]["name"])


def _set_parameters(manifest: dict[str, Any], values: Mapping[str, Any]) -> None:
    arguments = manifest["spec"].setdefault("arguments", {})
    entries = arguments.setdefault("parameters", [])
    for name, value in values.items():
        entry = next((e for e in entries if e["name"] == name), None)
        if entry is None:
            entry = {"name": name}
            entries.append(entry)
        entry["value"] = json_text(value)


class WorkflowTemplate(Holder):
    """A WorkFlowTemplate: a workflow kept in a namespace, which workflows run whole
    (`Workflow(workflow_template=...)`) or call one template of (`fn.by_reference(name)`)."""

    kind = "WorkFlowTemplate"

    def __init__(
        self,
        name: str,
        *,
        namespace: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, namespace=namespace, parameters=parameters, labels=labels, spec=spec)
        self.name: str = name

    def apply(
        self,
        namespace: str | None = None,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        api: Any = None,
    ) -> None:
        """Creates the template, or replaces the one of that name."""
        from kubernetes import client as k8s

        if api is None:
            api, default_namespace = connect(kubeconfig, context)
        else:
            default_namespace = "default"
        namespace = namespace or self.namespace or default_namespace
        manifest = copy.deepcopy(self.to_manifest())
        manifest["metadata"].pop("namespace", None)
        objects = k8s.CustomObjectsApi(api)
        try:
            existing: Any = objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "workflowtemplates", self.name
            )
        except k8s.ApiException as error:
            if error.status != 404:
                raise api_error(error, f"reading workflowtemplate {self.name}") from None
            create(api, namespace, manifest)
            return
        manifest["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        try:
            objects.replace_namespaced_custom_object(
                GROUP, VERSION, namespace, "workflowtemplates", self.name, manifest
            )
        except k8s.ApiException as error:
            raise api_error(error, f"replacing workflowtemplate {self.name}") from None
