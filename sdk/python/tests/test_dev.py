"""`wo.dev()`: started, serving WorkFlows, and stopped at the end of its `with` block."""

from __future__ import annotations

import workflow_operator as wo


def test_dev_serves_until_its_block_ends_then_exits_cleanly() -> None:
    with wo.dev() as cluster:
        assert cluster.process.poll() is None
        assert "control plane serving at" in cluster.output
        with open(cluster.kubeconfig) as kubeconfig:
            assert "server:" in kubeconfig.read()
    # SIGTERM: dev stops the operator and its store and exits 0.
    assert cluster.process.returncode == 0, cluster.output
