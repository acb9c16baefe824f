"""The SDK's tests run `workflow-operator` from `$WORKFLOW_OPERATOR_BIN` (`make test` sets it to
the debug build), else from this repository's `target/debug/` (`$CARGO_TARGET_DIR/debug/`)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "python"


def _binary() -> str | None:
    if os.environ.get("WORKFLOW_OPERATOR_BIN"):
        return os.environ["WORKFLOW_OPERATOR_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    built = target / "debug" / "workflow-operator"
    return str(built) if built.exists() else None


if _binary() is not None:
    os.environ["WORKFLOW_OPERATOR_BIN"] = str(_binary())


@pytest.fixture(scope="session")
def operator_binary() -> str:
    binary = _binary()
    if binary is None:
        pytest.fail("no workflow-operator: set WORKFLOW_OPERATOR_BIN or run cargo build")
    return binary


def load_example(name: str) -> ModuleType:
    """An example of examples/python/ as a module (its workflow built, not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
