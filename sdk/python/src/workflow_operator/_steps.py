"""`@script` and `@container`: a Python function as a template (its parameters the template's
inputs) that each call inside a `with Workflow(...)` block turns into a step."""

from __future__ import annotations

import inspect
import textwrap
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from ._model import Holder, Step, current
from ._refs import STEP_REFERENCE, Ref, json_text
from .errors import WorkflowError

P = ParamSpec("P")
R = TypeVar("R")

#: What a script runs with: `python3` is in every Python image (and on the embedded plane's host).
PYTHON = ["python3"]
DEFAULT_IMAGE = "python:3.12"
# Where a script reads each input: an environment variable, which holds any text as it is.
INPUT_ENV = "WO_INPUT_"

# The keywords of a call that set the step rather than an argument (a function's own parameter
# of the same name wins).
OPTIONS = frozenset(
    {"name", "step_name", "when", "retries", "retry_strategy", "timeout", "with_items"}
)


class RetryStrategy:
    """`retryStrategy`: `limit` more attempts, each a Job of its own, after a back-off."""

    def __init__(
        self,
        limit: int,
        *,
        policy: str | None = None,
        backoff: Mapping[str, Any] | None = None,
        expression: str | None = None,
    ) -> None:
        self.fields: dict[str, Any] = {"limit": limit}
        if policy is not None:
            self.fields["retryPolicy"] = policy
        if backoff is not None:
            self.fields["backoff"] = dict(backoff)
        if expression is not None:
            self.fields["expression"] = expression


def step_options(
    retries: int | None = None,
    retry_strategy: RetryStrategy | Mapping[str, Any] | None = None,
    timeout: int | None = None,
    when: Any = None,
) -> dict[str, Any]:
    """The manifest fields of the keywords a decorator and a call share."""
    fields: dict[str, Any] = {}
    if when is not None:
        fields["when"] = str(when)
    if retries is not None:
        fields["retries"] = retries
    if retry_strategy is not None:
        strategy = retry_strategy
        fields["retryStrategy"] = (
            dict(strategy.fields) if isinstance(strategy, RetryStrategy) else dict(strategy)
        )
    if timeout is not None:
        fields["timeout"] = timeout
    return fields


class StepFunction(Generic[P, R]):
    """A decorated function. Called inside a `with Workflow(...)` block it adds a step and
    returns it; called anywhere else it is the plain function."""

    def __init__(
        self,
        fn: Callable[P, R],
        template: dict[str, Any],
        runs_locally: bool,
        ref: dict[str, str] | None = None,
    ) -> None:
        self.fn = fn
        self.template = template
        self.signature = inspect.signature(fn)
        self._runs_locally = runs_locally
        # Set: the steps call the template of a shared template by reference (`templateRef`).
        self.ref = ref

    def by_reference(self, shared: str) -> StepFunction[P, R]:
        """This function's template in the shared template (WorkFlowTemplate) `shared`, called
        by reference: its steps carry `templateRef` instead of a copy of the template."""
        ref = {"name": shared, "template": self.name}
        return StepFunction(self.fn, self.template, self._runs_locally, ref)

    @property
    def name(self) -> str:
        return str(self.template["name"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        holder = current()
        if holder is None:
            if not self._runs_locally:
                raise WorkflowError(
                    f"{self.name}() is a container step: call it inside `with wo.Workflow(...)`"
                )
            return self.fn(*args, **kwargs)
        return self.call(holder, args, kwargs, {})

    def map(self, **kwargs: Any) -> Step:
        """One step that runs once per item: each keyword given a list (or a step's result, a
        JSON list) is taken item by item, together (zipped); the other keywords are the same
        for every item."""
        holder = current()
        if holder is None:
            raise WorkflowError(f"{self.name}.map() adds a step: call it inside a `with` block")
        mapped = {
            k: v
            for k, v in kwargs.items()
            if k in self.signature.parameters and isinstance(v, (list, tuple, Ref))
        }
        if not mapped:
            raise WorkflowError(f"{self.name}.map() needs a keyword argument given a list")
        return self.call(holder, (), kwargs, _fan_out(self.name, mapped))

    def call(
        self,
        holder: Holder,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        fan_out: dict[str, Any],
    ) -> Step:
        parameters = self.signature.parameters
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in OPTIONS and k not in parameters}
        arguments = {k: fan_out.get("arguments", {}).get(k, v) for k, v in kwargs.items()}
        try:
            bound = self.signature.bind(*args, **arguments)
        except TypeError as error:
            raise TypeError(f"{self.name}(): {error}") from None
        _check_types(self.fn, bound.arguments)
        entries, refs = _arguments(bound.arguments)
        names = (options.pop("step_name", None), options.pop("name", None))
        name = names[0] or names[1] or self.name
        fields: dict[str, Any] = (
            {"templateRef": dict(self.ref)} if self.ref else {"template": self.name}
        )
        if entries:
            fields["arguments"] = {"parameters": entries}
        items = options.pop("with_items", None)
        if items is not None:
            fields["withItems"] = list(items)
        fields.update(fan_out.get("fields", {}))
        when = options.get("when")
        fields.update(step_options(**options))
        refs += list(fan_out.get("refs", []))
        for step in getattr(when, "steps", ()):
            refs.append(Ref(f"`when: {when}`", None, step=step))
        if self.ref is None:
            holder.add_template(self.template)
        return holder.add_step(name, fields, refs)


def _fan_out(name: str, mapped: dict[str, Any]) -> dict[str, Any]:
    """The fields and arguments of a step that runs once per item of `mapped`'s values."""
    refs = [v for v in mapped.values() if isinstance(v, Ref)]
    if refs:
        if len(mapped) > 1 or refs[0].step is None:
            raise WorkflowError(
                f"{name}.map(): a step's result can be mapped over alone (withParam)"
            )
        key, ref = next(iter(mapped.items()))
        return {
            "fields": {"withParam": ref.expr},
            "arguments": {key: Ref("{{item}}", None)},
            "refs": [ref],
        }
    lengths = {len(v) for v in mapped.values()}
    if len(lengths) > 1:
        raise WorkflowError(f"{name}.map(): the lists have different lengths {sorted(lengths)}")
    if len(mapped) == 1:
        key, values = next(iter(mapped.items()))
        return {"fields": {"withItems": list(values)}, "arguments": {key: Ref("{{item}}", None)}}
    items = [
        dict(zip(mapped, values, strict=True)) for values in zip(*mapped.values(), strict=True)
    ]
    arguments = {k: Ref(f"{{{{item.{k}}}}}", None) for k in mapped}
    return {"fields": {"withItems": items}, "arguments": arguments}


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except (NameError, TypeError):
        # An annotation this program cannot resolve: only `str` is told apart.
        return {k: str for k, v in fn.__annotations__.items() if v in (str, "str")}


def _check_types(fn: Callable[..., Any], values: Mapping[str, Any]) -> None:
    """A Python value given where the annotation says another plain type would fail in the pod,
    after the workflow was submitted: say so now."""
    hints = _hints(fn)
    for name, value in values.items():
        expected = typing.get_origin(hints.get(name)) or hints.get(name)
        if isinstance(value, Ref) or expected not in (str, int, float, bool, list, dict):
            continue
        fits = isinstance(value, expected) or (expected is float and isinstance(value, int))
        if not fits or (expected is int and isinstance(value, bool)):
            raise TypeError(f"{fn.__name__}(): {name} must be {expected.__name__}, got {value!r}")


def _arguments(values: Mapping[str, Any]) -> tuple[list[dict[str, str]], list[Ref]]:
    """A call's arguments as the manifest's `arguments.parameters`, and what they refer to."""
    entries, refs = [], []
    for name, value in values.items():
        if isinstance(value, Ref):
            refs.append(value)
        text = value.expr if isinstance(value, Ref) else json_text(value)
        if not isinstance(value, Ref) and STEP_REFERENCE.search(text):
            refs.append(Ref(text, None))
        entries.append({"name": name, "value": text})
    return entries, refs


def _inputs(fn: Callable[..., Any]) -> list[dict[str, str]]:
    inputs = []
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise WorkflowError(f"{fn.__name__}: *args and **kwargs cannot be step inputs")
        entry = {"name": parameter.name}
        if parameter.default is not parameter.empty:
            entry["default"] = json_text(parameter.default)
        inputs.append(entry)
    return inputs


def _kinds(fn: Callable[..., Any]) -> dict[str, str]:
    """How a script decodes each input: `str` keeps text that is not a JSON string as it is;
    the others must be JSON; `any` (no annotation) takes JSON, else the text."""
    hints = _hints(fn)
    kinds = {}
    for name in inspect.signature(fn).parameters:
        hint = hints.get(name)
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        kinds[name] = "str" if hint is str else "any" if hint in (None, Any) or union else "json"
    return kinds


def function_source(fn: Callable[..., Any]) -> str:
    """The function's own text, without its decorators."""
    lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("def ", "async def ")))
    return "\n".join(lines[start:]) + "\n"


RUNNER = """

# workflow_operator: call {name} with the step's inputs; its return value, as JSON, is the
# step's result (its standard output, and the output `result`). What it prints goes to stderr.
def _wo_input(name, kind):
    import json, os
    text = os.environ["{env}" + name]
    try:
        value = json.loads(text)
    except ValueError:
        if kind == "json":
            raise SystemExit(f"input {{name}}: {{text!r}} is not JSON") from None
        return text
    return text if kind == "str" and not isinstance(value, str) else value


def _wo_main():
    import json, os, sys
    stdout, sys.stdout = sys.stdout, sys.stderr
    result = {name}(**{{k: _wo_input(k, kind) for k, kind in {kinds!r}.items()}})
    sys.stdout = stdout
    try:
        text = json.dumps(result)
    except (TypeError, ValueError) as error:
        raise SystemExit(f"{name} returned a value that is not JSON: {{error}}") from None
    print(text)
    with open(os.environ["WORKFLOW_OUTPUTS"], "a") as outputs:
        outputs.write("result=" + text + "\\n")


_wo_main()
"""


def script_source(fn: Callable[..., Any]) -> str:
    """The step's `source`: the function, then a call of it with the inputs."""
    runner = RUNNER.format(name=fn.__name__, env=INPUT_ENV, kinds=_kinds(fn))
    # Annotations stay unevaluated: a type the image cannot import does not stop the script.
    return "from __future__ import annotations\n\n" + function_source(fn) + runner


def _template(
    fn: Callable[..., Any],
    container: dict[str, Any],
    options: dict[str, Any],
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    template: dict[str, Any] = {"name": options.pop("template", None) or fn.__name__}
    inputs = _inputs(fn)
    if inputs:
        template["inputs"] = {"parameters": inputs}
    template.update(container)
    template.update(step_options(**options))
    template.update(dict(extra or {}))
    return template


def script(
    image: str = DEFAULT_IMAGE,
    *,
    template: str | None = None,
    retries: int | None = None,
    retry_strategy: RetryStrategy | Mapping[str, Any] | None = None,
    timeout: int | None = None,
    fields: Mapping[str, Any] | None = None,
) -> Callable[[Callable[P, R]], StepFunction[P, R]]:
    """A Python function as a step: its body is the step's `source`, run by `python3` in
    `image`; its parameters the template's inputs; its return value the step's result, as JSON.
    The function must be self-contained (its imports inside it). `fields`: more template fields
    as the manifest writes them (`resources`, `env`, ...)."""

    def decorate(fn: Callable[P, R]) -> StepFunction[P, R]:
        env = [
            {"name": INPUT_ENV + p["name"], "value": f"{{{{inputs.parameters.{p['name']}}}}}"}
            for p in _inputs(fn)
        ]
        container: dict[str, Any] = {"image": image, "command": list(PYTHON)}
        if env:
            container["env"] = env
        container["source"] = script_source(fn)
        options = dict(
            template=template, retries=retries, retry_strategy=retry_strategy, timeout=timeout
        )
        return StepFunction(fn, _template(fn, container, options, fields), runs_locally=True)

    return decorate


def container(
    image: str,
    *,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    template: str | None = None,
    retries: int | None = None,
    retry_strategy: RetryStrategy | Mapping[str, Any] | None = None,
    timeout: int | None = None,
    fields: Mapping[str, Any] | None = None,
) -> Callable[[Callable[P, R]], StepFunction[P, R]]:
    """A container step: `image` running `command` and `args`, in which
    `{{inputs.parameters.NAME}}` is the argument of the function's parameter NAME. The function's
    body is not run; its parameters are the template's inputs."""

    def decorate(fn: Callable[P, R]) -> StepFunction[P, R]:
        spec: dict[str, Any] = {"image": image}
        if command is not None:
            spec["command"] = list(command)
        if args is not None:
            spec["args"] = list(args)
        options = dict(
            template=template, retries=retries, retry_strategy=retry_strategy, timeout=timeout
        )
        return StepFunction(fn, _template(fn, spec, options, fields), runs_locally=False)

    return decorate


def input(name: str) -> str:
    """`{{inputs.parameters.NAME}}`, for a container's command."""
    return f"{{{{inputs.parameters.{name}}}}}"
