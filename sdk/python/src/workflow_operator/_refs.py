"""Values known only when a workflow runs (a parameter, a step's result or output, an item), as
the `{{...}}` text a manifest carries, and conditions over them as the CEL a `when` carries."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._model import Step

# A reference to a step written by hand in a string: `{{steps.NAME.outputs...}}`.
STEP_REFERENCE = re.compile(r"\{\{\s*steps\.([^.}\[\]]+)\.")


class Ref:
    """A value filled in when the workflow runs. `str(ref)` is its `{{...}}` text, so it can be
    used inside an f-string; as a step's argument the SDK also checks where it comes from.

    `json` says whether the text is JSON (a script's result is) or plain text (a parameter)."""

    def __init__(
        self, expr: str, cel: str | None, *, step: Step | None = None, json: bool = False
    ) -> None:
        self.expr = expr
        self.cel = cel
        self.step = step
        self.json = json

    def __str__(self) -> str:
        return self.expr

    def __repr__(self) -> str:
        return f"Ref({self.expr!r})"

    def _compare(self, op: str, other: object) -> Condition:
        if self.cel is None:
            raise TypeError(f"{self.expr} cannot be used in a `when`")
        if isinstance(other, Ref):
            if other.cel is None:
                raise TypeError(f"{other.expr} cannot be used in a `when`")
            steps = tuple(s for s in (self.step, other.step) if s is not None)
            return Condition(f"{self.cel} {op} {other.cel}", steps)
        # A result is JSON text: compare it with the value's JSON, so `flip.result == "heads"`
        # means what it says.
        text = json_text(other) if self.json else str(other)
        steps = (self.step,) if self.step is not None else ()
        return Condition(f"{self.cel} {op} {json.dumps(text)}", steps)

    def __eq__(self, other: object) -> Condition:  # type: ignore[override]
        return self._compare("==", other)

    def __ne__(self, other: object) -> Condition:  # type: ignore[override]
        return self._compare("!=", other)

    __hash__ = None  # type: ignore[assignment]


class Condition:
    """A `when`: CEL over upstream steps' outputs, made by comparing references
    (`flip.result == "heads"`) and combined with `&`, `|` and `~`."""

    def __init__(self, cel: str, steps: tuple[Step, ...] = ()) -> None:
        self.cel = cel
        self.steps = steps

    def __and__(self, other: Condition) -> Condition:
        return Condition(f"({self.cel}) && ({other.cel})", self.steps + other.steps)

    def __or__(self, other: Condition) -> Condition:
        return Condition(f"({self.cel}) || ({other.cel})", self.steps + other.steps)

    def __invert__(self) -> Condition:
        return Condition(f"!({self.cel})", self.steps)

    def __str__(self) -> str:
        return self.cel

    def __repr__(self) -> str:
        return f"Condition({self.cel!r})"


def json_text(value: Any) -> str:
    """A value as the text a step receives: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def cel_string(text: str) -> str:
    """`text` as a CEL string literal (CEL's escapes are JSON's)."""
    return json.dumps(text)


def parameter_ref(name: str) -> Ref:
    """`{{workflow.parameters.NAME}}`."""
    return Ref(f"{{{{workflow.parameters.{name}}}}}", f"workflow.parameters[{cel_string(name)}]")


def input_ref(name: str) -> Ref:
    """`{{inputs.parameters.NAME}}`: a template's input, inside the template."""
    return Ref(f"{{{{inputs.parameters.{name}}}}}", None)


#: The item of a step that fans out (`with_items=`): `{{item}}`.
item = Ref("{{item}}", None)

#: The attempt of a step with a `retry_strategy`, 0 for the first: `{{retries}}`.
attempt = Ref("{{retries}}", None)
