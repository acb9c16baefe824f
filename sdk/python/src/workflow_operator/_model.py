"""Steps and the workflows and shared templates that hold them: built in a `with` block, turned
into a manifest (and back), checked when the block ends."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

import yaml

from ._refs import STEP_REFERENCE, Ref, cel_string, json_text, parameter_ref
from .errors import NotUpstream, WorkflowError

API_VERSION = "workflow.crd.com/v1"
GROUP, VERSION = "workflow.crd.com", "v1"

# The workflows and templates whose `with` block is open, innermost last.
_open: list[Holder] = []


def current() -> Holder | None:
    """The workflow or template whose `with` block encloses the caller, if any."""
    return _open[-1] if _open else None


class Step:
    """One step (`spec.containers[]`): its name, its fields as the manifest writes them, and the
    steps it depends on. `a >> b` makes b depend on a; lists work on either side."""

    def __init__(self, holder: Holder, name: str, fields: dict[str, Any]) -> None:
        self.holder = holder
        self.name = name
        self.fields = fields
        self.upstream: list[Step] = []
        # What the step refers to, checked when the `with` block ends.
        self.refs: list[Ref] = []

    def __repr__(self) -> str:
        return f"Step({self.name!r})"

    @property
    def fans_out(self) -> bool:
        return any(k in self.fields for k in ("withItems", "withParam", "withSequence"))

    @property
    def result(self) -> Ref:
        """The step's result: a script's return value (JSON), a container's standard output."""
        cel = f"steps[{cel_string(self.name)}].outputs.result"
        return Ref(f"{{{{steps.{self.name}.outputs.result}}}}", cel, step=self, json=True)

    def output(self, key: str) -> Ref:
        """An output the step writes (`key=value` to `$WORKFLOW_OUTPUTS`, or a parameter)."""
        cel = f"steps[{cel_string(self.name)}].outputs[{cel_string(key)}]"
        return Ref(f"{{{{steps.{self.name}.outputs.{key}}}}}", cel, step=self)

    def after(self, *steps: Step) -> Step:
        """Depend on `steps` (as `steps >> self`)."""
        for step in steps:
            if step.holder is not self.holder:
                raise WorkflowError(
                    f"step {self.name!r} cannot depend on {step.name!r} of another workflow"
                )
            if step not in self.upstream:
                self.upstream.append(step)
        return self

    def __rshift__(self, other: Step | list[Step]) -> Step | list[Step]:
        for step in _steps(other):
            step.after(self)
        return other

    def __rrshift__(self, other: list[Step]) -> Step:
        return self.after(*_steps(other))

    def ancestors(self) -> set[Step]:
        """Every step upstream of this one."""
        seen: set[Step] = set()
        todo = list(self.upstream)
        while todo:
            step = todo.pop()
            if step not in seen:
                seen.add(step)
                todo.extend(step.upstream)
        return seen

    def to_dict(self) -> dict[str, Any]:
        order = {step: i for i, step in enumerate(self.holder.steps.values())}
        entry: dict[str, Any] = {"stepName": self.name}
        if self.upstream:
            ordered = sorted(self.upstream, key=lambda s: order.get(s, len(order)))
            entry["dependsOn"] = [s.name for s in ordered]
        entry.update(copy.deepcopy(self.fields))
        return entry


def _steps(value: Step | Iterable[Step]) -> list[Step]:
    if isinstance(value, Step):
        return [value]
    steps = list(value)
    for step in steps:
        if not isinstance(step, Step):
            raise TypeError(f">> takes steps and lists of steps, not {step!r}")
    return steps


class Parameters(Mapping[str, Ref]):
    """A workflow's parameters as references: `w.parameters.who`, `w.parameters["who"]`."""

    def __init__(self, holder: Holder) -> None:
        self._holder = holder

    def _names(self) -> list[str]:
        return [p["name"] for p in self._holder.parameter_entries]

    def __getitem__(self, name: str) -> Ref:
        if name not in self._names():
            raise KeyError(
                f"{self._holder.kind} has no parameter {name!r} (it declares {self._names()})"
            )
        return parameter_ref(name)

    def __getattr__(self, name: str) -> Ref:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as error:
            raise AttributeError(error.args[0]) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


H = TypeVar("H", bound="Holder")


class Holder:
    """What a WorkFlow and a WorkFlowTemplate share: metadata, parameters, templates, steps."""

    kind = "WorkFlow"

    def __init__(
        self,
        name: str | None = None,
        *,
        generate_name: str | None = None,
        namespace: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> None:
        if name is None and generate_name is None:
            raise WorkflowError(f"a {self.kind} needs name= or generate_name=")
        self.name = name
        self.generate_name = generate_name
        self.namespace = namespace
        self.labels = dict(labels or {})
        self.parameter_entries: list[dict[str, Any]] = [
            {"name": k} if v is None else {"name": k, "value": json_text(v)}
            for k, v in (parameters or {}).items()
        ]
        self.spec: dict[str, Any] = dict(copy.deepcopy(spec or {}))
        self.templates: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, Step] = {}

    @property
    def parameters(self) -> Parameters:
        return Parameters(self)

    def __enter__(self: H) -> H:
        _open.append(self)
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        _open.remove(self)
        if error is None:
            self.check()

    def add_step(self, name: str, fields: dict[str, Any], refs: list[Ref]) -> Step:
        if name in self.steps:
            raise WorkflowError(
                f"{self.kind} already has a step {name!r}: give this one another name (name=...)"
            )
        step = Step(self, name, fields)
        step.refs = refs
        self.steps[name] = step
        return step

    def add_template(self, template: dict[str, Any]) -> None:
        name = template["name"]
        known = self.templates.get(name)
        if known is not None and known != template:
            raise WorkflowError(
                f"two different templates are named {name!r} (two functions of that name?): "
                "rename one, or give it template=..."
            )
        self.templates[name] = template

    def check(self) -> None:
        """Every reference to a step is to one upstream, and to a value it has."""
        for step in self.steps.values():
            ancestors = step.ancestors()
            for ref in step.refs:
                for other in _referred(self, ref):
                    _check_reference(step, other, ancestors, ref)

    def to_manifest(self) -> dict[str, Any]:
        """The object as `kubectl apply` and `workflow-operator validate` take it."""
        metadata: dict[str, Any] = {}
        if self.name is not None:
            metadata["name"] = self.name
        else:
            metadata["generateName"] = self.generate_name
        if self.namespace is not None:
            metadata["namespace"] = self.namespace
        if self.labels:
            metadata["labels"] = dict(self.labels)
        spec: dict[str, Any] = {}
        if self.parameter_entries:
            spec["arguments"] = {"parameters": copy.deepcopy(self.parameter_entries)}
        spec.update(copy.deepcopy(self.spec))
        if self.templates:
            spec["templates"] = copy.deepcopy(list(self.templates.values()))
        if self.steps:
            spec["containers"] = [step.to_dict() for step in self.steps.values()]
        return {"apiVersion": API_VERSION, "kind": self.kind, "metadata": metadata, "spec": spec}

    def to_yaml(self) -> str:
        return yaml.dump(self.to_manifest(), Dumper=_Dumper, sort_keys=False, width=100)

    @classmethod
    def from_manifest(cls: type[H], manifest: Mapping[str, Any]) -> H:
        """The object of a manifest (a dict), its steps as `Step`s and the rest kept as is."""
        kind = manifest.get("kind")
        if kind != cls.kind:
            raise WorkflowError(f"expected a {cls.kind} manifest, got kind {kind!r}")
        metadata = manifest.get("metadata") or {}
        spec = dict(copy.deepcopy(manifest.get("spec") or {}))
        arguments = spec.pop("arguments", None) or {}
        templates = spec.pop("templates", None) or []
        containers = spec.pop("containers", None) or []
        holder = cls(
            metadata.get("name"),
            generate_name=metadata.get("generateName"),
            namespace=metadata.get("namespace"),
            labels=metadata.get("labels"),
            spec=spec,
        )
        holder.parameter_entries = list(arguments.get("parameters") or [])
        holder.templates = {t["name"]: t for t in templates}
        _add_steps(holder, containers)
        return holder

    @classmethod
    def from_yaml(cls: type[H], text: str) -> H:
        return cls.from_manifest(yaml.safe_load(text))

    def diff(self, other: Holder) -> list[str]:
        """The fields where two manifests differ, one line each (`spec.containers[shout]...`)."""
        return _diff(self.to_manifest(), other.to_manifest(), "")


def _add_steps(holder: Holder, containers: list[dict[str, Any]]) -> None:
    depends: dict[str, list[str]] = {}
    for entry in containers:
        fields = dict(entry)
        name = fields.pop("stepName")
        depends[name] = list(fields.pop("dependsOn", None) or [])
        refs = [Ref(t, None) for t in _strings(fields) if STEP_REFERENCE.search(t)]
        holder.add_step(name, fields, refs)
    for name, upstream in depends.items():
        for dependency in upstream:
            if dependency not in holder.steps:
                raise WorkflowError(f"step {name!r} depends on {dependency!r}, which is not a step")
            holder.steps[name].after(holder.steps[dependency])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _referred(holder: Holder, ref: Ref) -> list[Step]:
    """The steps a reference names: its own, or those a hand-written `{{steps.X...}}` names."""
    if ref.step is not None:
        return [ref.step]
    names = STEP_REFERENCE.findall(ref.expr)
    missing = [n for n in names if n not in holder.steps]
    if missing:
        raise WorkflowError(f"{ref.expr} names no step of this {holder.kind}: {missing}")
    return [holder.steps[n] for n in names]


def _check_reference(step: Step, other: Step, ancestors: set[Step], ref: Ref) -> None:
    if other.holder is not step.holder:
        raise NotUpstream(f"step {step.name!r} refers to {other.name!r} of another workflow")
    if other not in ancestors:
        raise NotUpstream(
            f"step {step.name!r} refers to {ref.expr}, but {other.name!r} does not run before "
            f"it: add `{other.name} >> {step.name}` (or name= the steps you meant)"
        )
    if other.fans_out and "outputs" in ref.expr:
        raise NotUpstream(
            f"step {step.name!r} refers to {ref.expr}, but {other.name!r} fans out: it has one "
            "result per item, which no later step can name; depend on it with `>>` and read "
            f"the results after the run with run.result({other.name!r})"
        )


def _diff(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        lines = []
        for key in list(a) + [k for k in b if k not in a]:
            lines += _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return lines
    named_a, named_b = _by_name(a), _by_name(b)
    if named_a is not None and named_b is not None:
        # Steps, templates and parameters: matched by name, as their order means nothing.
        lines = []
        for name in list(named_a) + [n for n in named_b if n not in named_a]:
            lines += _diff(named_a.get(name), named_b.get(name), f"{path}[{name}]")
        return lines
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        lines = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            lines += _diff(x, y, f"{path}[{i}]")
        return lines
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _by_name(value: Any) -> dict[str, Any] | None:
    """A list of named entries (`stepName` or `name`) by name; None for any other value."""
    if not isinstance(value, list) or not value:
        return None
    named = {}
    for entry in value:
        name = entry.get("stepName", entry.get("name")) if isinstance(entry, dict) else None
        if not isinstance(name, str) or name in named:
            return None
        named[name] = entry
    return named


class _Dumper(yaml.SafeDumper):
    """Writes a multi-line string (a script's source) as a `|` block."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)
