"""A failing step with retries: one that succeeds on a later attempt, one that runs out of them."""

from __future__ import annotations

import workflow_operator as wo


@wo.script()
def flaky(attempt: int) -> str:
    if attempt < 2:
        raise RuntimeError(f"attempt {attempt} failed")
    return f"succeeded on attempt {attempt}"


@wo.script(retries=1)
def broken() -> None:
    raise RuntimeError("the data is not there")


def test_a_step_is_retried_until_it_succeeds_or_runs_out(workflow_cluster: wo.DevCluster) -> None:
    with wo.Workflow(generate_name="flaky-") as recovers:
        flaky(attempt=wo.attempt, retry_strategy=wo.RetryStrategy(limit=3))
    with wo.Workflow(generate_name="broken-", spec={"maxStepTimeout": 30}) as fails:
        broken()
    step = recovers.to_manifest()["spec"]["containers"][0]
    assert step["retryStrategy"] == {"limit": 3}
    assert fails.to_manifest()["spec"]["templates"][0]["retries"] == 1
    recovered, failed = workflow_cluster.submit(recovers), workflow_cluster.submit(fails)

    assert recovered.wait(timeout=60) == "Completed", recovered.message
    assert recovered.result("flaky") == "succeeded on attempt 2"
    log = recovered.logs()["flaky"]
    assert "attempt 0 failed" in log and "attempt 1 failed" in log, log

    assert failed.wait(timeout=60) == "Failed"
    assert "step broken failed" in str(failed.message), failed.message
    log = failed.logs()["broken"]
    # `retries: 1` is one more pod after the first: the error twice.
    assert log.count("RuntimeError: the data is not there") == 2, log
    try:
        failed.result("broken")
    except wo.NoResult as error:
        assert "'broken' has no result: it is Failed" in str(error), error
    else:
        raise AssertionError("a failed step has no result")
