"""Errors a user can act on: a reference to a step not upstream, a result that is not JSON, a
timeout that names the step still running, a binary that cannot be found."""

from __future__ import annotations

import time

import pytest

import workflow_operator as wo


@wo.script()
def make(n: int) -> list[int]:
    return list(range(n))


@wo.script()
def use(values: object) -> str:
    return str(values)


@wo.script()
def unprintable() -> object:
    return {1, 2}


@wo.container(image="busybox:1.36", command=["echo", "plain text"])
def plain() -> None: ...


@wo.container(image="busybox:1.36", command=["sleep", "30"])
def nap() -> None: ...


def test_a_reference_to_a_step_not_upstream_says_what_to_add() -> None:
    with pytest.raises(wo.NotUpstream, match=r"'make' does not run before it: add `make >> use`"):
        with wo.Workflow(generate_name="x-"):
            use(values=make(n=2).result)
    # Written by hand in a string, and in a `when`, too.
    with pytest.raises(wo.NotUpstream, match=r"\{\{steps.make.outputs.result\}\}"):
        with wo.Workflow(generate_name="x-"):
            made = make(n=2)
            use(values=f"{made.result} and more")
    with pytest.raises(wo.NotUpstream, match="add `make >> use`"):
        with wo.Workflow(generate_name="x-"):
            use(values=1, when=make(n=2).result == [0, 1])


def test_a_result_of_a_step_that_fans_out_cannot_be_passed_on() -> None:
    with pytest.raises(wo.NotUpstream, match=r"'make' fans out: .* run.result\('make'\)"):
        with wo.Workflow(generate_name="x-"):
            made = make.map(n=[1, 2])
            made >> use(values=made.result)


def test_mistakes_in_building_a_workflow_are_named() -> None:
    with pytest.raises(wo.WorkflowError, match="already has a step 'make'"):
        with wo.Workflow(generate_name="x-"):
            make(n=1)
            make(n=2)
    with pytest.raises(AttributeError, match=r"no parameter 'whom' \(it declares \['who'\]\)"):
        with wo.Workflow(generate_name="x-", parameters={"who": "me"}) as w:
            make(n=w.parameters.whom)
    with pytest.raises(TypeError, match="make\\(\\): missing a required argument: 'n'"):
        with wo.Workflow(generate_name="x-"):
            make()
    with pytest.raises(TypeError, match=r"make\(\): n must be int, got 'abc'"):
        with wo.Workflow(generate_name="x-"):
            make(n="abc")
    with pytest.raises(wo.WorkflowError, match="container step: call it inside"):
        plain()


def test_results_that_are_not_json_are_named(workflow_cluster: wo.DevCluster) -> None:
    with wo.Workflow(generate_name="not-json-") as w:
        plain()
    with wo.Workflow(generate_name="unprintable-") as bad:
        unprintable()
    run, failed = workflow_cluster.submit(w), workflow_cluster.submit(bad)
    assert run.wait(timeout=60) == "Completed", run.message
    with pytest.raises(wo.ResultNotJSON, match=r"step 'plain'.s result is not JSON: 'plain text'"):
        run.result("plain")
    assert failed.wait(timeout=60) == "Failed"
    log = failed.logs()["unprintable"]
    assert "unprintable returned a value that is not JSON" in log, log


def test_a_timeout_names_the_step_still_running(workflow_cluster: wo.DevCluster) -> None:
    with wo.Workflow(generate_name="slow-") as w:
        nap()
    run = workflow_cluster.submit(w)
    deadline = time.monotonic() + 30
    while run.phase != "Started":
        assert time.monotonic() < deadline, f"never started: {run.get().get('status')}"
        time.sleep(0.05)
    with pytest.raises(wo.WorkflowTimeout, match=r"within 0.2s .*still running: nap \(Running\)"):
        run.wait(timeout=0.2)
    run.delete()


def test_a_binary_that_is_not_there_says_where_it_was_looked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKFLOW_OPERATOR_BIN", "/nonexistent/workflow-operator")
    with pytest.raises(wo.DevClusterError, match=r"/nonexistent/workflow-operator .* not an exec"):
        wo.dev()
    monkeypatch.delenv("WORKFLOW_OPERATOR_BIN")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(wo.DevClusterError, match=r"not on the PATH: .* WORKFLOW_OPERATOR_BIN"):
        wo.dev()


def test_a_kubeconfig_that_is_not_there_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/config")
    with wo.Workflow(generate_name="x-") as w:
        plain()
    with pytest.raises(wo.WorkflowError, match=r"^kubeconfig /nonexistent/config: "):
        w.submit()
