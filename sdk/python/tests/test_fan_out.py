"""Fan-out over objects (several lists mapped together) and over `with_items` with `wo.item`,
and a fan-in after both."""

from __future__ import annotations

import workflow_operator as wo


@wo.script()
def label(n: int, name: str) -> str:
    return f"{name}={n}"


@wo.script()
def double(n: int) -> int:
    return 2 * n


@wo.container(image="busybox:1.36", command=["echo", "all done"])
def done() -> None: ...


def test_items_zipped_and_given_by_keyword_each_run(workflow_cluster: wo.DevCluster) -> None:
    with wo.Workflow(generate_name="fan-") as w:
        labels = label.map(n=[1, 2], name=["a", "b"])
        doubles = double(n=wo.item, with_items=[5, 6, 7])
        [labels, doubles] >> done()
    steps = {s["stepName"]: s for s in w.to_manifest()["spec"]["containers"]}
    assert steps["label"]["withItems"] == [{"n": 1, "name": "a"}, {"n": 2, "name": "b"}]
    assert steps["done"]["dependsOn"] == ["label", "double"]

    run = workflow_cluster.submit(w)
    assert run.wait(timeout=60) == "Completed", run.message
    assert run.result("label") == ["a=1", "b=2"]
    assert run.result("double") == [10, 12, 14]
    assert run.result("double[2]") == 14
    assert run.logs()["done"] == "all done\n"
