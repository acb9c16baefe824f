"""The examples of examples/python/, run on the embedded control plane."""

from __future__ import annotations

import subprocess
import sys

import pytest

import workflow_operator as wo

from .conftest import EXAMPLES, load_example


def test_hello_passes_one_steps_result_to_the_next(
    workflow_cluster: wo.DevCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = load_example("hello")
    # As the user does: the kubeconfig found as kubectl finds it.
    workflow_cluster.namespace("team")
    monkeypatch.setenv("KUBECONFIG", workflow_cluster.kubeconfig)
    run = example.w.submit(namespace="team")
    assert run.namespace == "team" and run.name.startswith("py-")
    assert run.wait(timeout=60) == "Completed", run.message
    assert run.result("hello") == "hello world"
    assert run.result("shout") == "HELLO WORLD"
    assert set(run.logs()) == {"hello", "shout"}
    # A parameter given at submit replaces the workflow's value.
    again = workflow_cluster.submit(example.w, parameters={"who": 'quoted "you"'})
    assert again.wait(timeout=60) == "Completed", again.message
    assert again.result("shout") == 'HELLO QUOTED "YOU"'


def test_squares_fans_out_and_in(workflow_cluster: wo.DevCluster) -> None:
    example = load_example("squares")
    run = workflow_cluster.submit(example.w)
    assert run.wait(timeout=60) == "Completed", run.message
    assert run.result("numbers") == [1, 2, 3]
    assert run.result("square") == [1, 4, 9]
    assert run.result("largest") == "the largest is 3"
    logs = run.logs()
    assert logs["report"].strip() == "squared 3"
    # What a script prints is in its log beside its result (standard error and output, in no
    # set order), and not in its result.
    for i in range(3):
        lines = logs[f"square[{i}]"].splitlines()
        assert sorted(lines) == sorted([f"squaring {i + 1}", str((i + 1) ** 2)]), lines
    # The fan-in waits on the step that fans out, which the operator reads as all its items.
    steps = {s["stepName"]: s for s in example.w.to_manifest()["spec"]["containers"]}
    assert steps["square"]["withParam"] == "{{steps.numbers.outputs.result}}"
    assert steps["report"]["dependsOn"] == ["square"]


def test_examples_print_manifests_validate_accepts(operator_binary: str) -> None:
    for name in ("hello", "squares"):
        printed = subprocess.run(
            [sys.executable, str(EXAMPLES / f"{name}.py")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        checked = subprocess.run(
            [operator_binary, "validate", "-"], input=printed, capture_output=True, text=True
        )
        assert checked.returncode == 0, f"{name}: {checked.stdout}{checked.stderr}"
