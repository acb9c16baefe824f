"""The pytest plugin (registered by the package's `pytest11` entry point): `workflow_cluster`,
one embedded control plane for the whole test session.

    def test_hello(workflow_cluster):
        run = workflow_cluster.submit(my_workflow)
        assert run.wait() == "Completed"
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._dev import DevCluster, dev


@pytest.fixture(scope="session")
def workflow_cluster() -> Iterator[DevCluster]:
    """`workflow-operator dev` (from `$WORKFLOW_OPERATOR_BIN`, else the PATH), started once per
    test session and stopped at its end."""
    with dev() as cluster:
        yield cluster
