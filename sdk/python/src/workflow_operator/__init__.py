"""Write workflow-operator WorkFlows in Python, submit them, wait for them, read their steps'
logs and results; run them on the embedded control plane (`dev()`) from a program or a test.

    import workflow_operator as wo

    @wo.script(image="python:3.12")
    def hello(name: str) -> str:
        return "hello " + name

    with wo.Workflow(generate_name="py-", parameters={"who": "world"}) as w:
        hello(name=w.parameters.who)

    with wo.dev() as cluster:
        run = cluster.submit(w)
        run.wait()
        run.result("hello")  # "hello world"

See docs/python.md.
"""

from ._client import Run
from ._dev import DevCluster, dev
from ._model import Step
from ._refs import Condition, Ref, attempt, item
from ._steps import RetryStrategy, StepFunction, container, input, script
from ._workflow import Workflow, WorkflowTemplate
from .errors import (
    DevClusterError,
    NoResult,
    NotUpstream,
    ResultNotJSON,
    WorkflowError,
    WorkflowTimeout,
)

__all__ = [
    "Condition",
    "DevCluster",
    "DevClusterError",
    "NoResult",
    "NotUpstream",
    "Ref",
    "ResultNotJSON",
    "RetryStrategy",
    "Run",
    "Step",
    "StepFunction",
    "Workflow",
    "WorkflowError",
    "WorkflowTemplate",
    "WorkflowTimeout",
    "attempt",
    "container",
    "dev",
    "input",
    "item",
    "script",
]
