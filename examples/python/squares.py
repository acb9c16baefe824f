"""Fan-out and fan-in, a condition and a container step: square each number a first step lists,
one pod per number, then report once every square is done.

`python examples/python/squares.py` prints the manifest; with `--run` it runs it on the embedded
control plane (`workflow-operator` from `$WORKFLOW_OPERATOR_BIN`, else the PATH).
"""

from __future__ import annotations

import sys

import workflow_operator as wo


@wo.script()
def numbers(count: int) -> list[int]:
    return list(range(1, count + 1))


@wo.script()
def square(n: int) -> int:
    print(f"squaring {n}")  # goes to the step's log, not its result
    return n * n


@wo.script()
def largest(values: list[int]) -> str:
    return f"the largest is {max(values)}"


@wo.container(
    image="busybox:1.36", command=["sh", "-c", "echo squared {{inputs.parameters.count}}"]
)
def report(count: int) -> None: ...


with wo.Workflow(generate_name="squares-", parameters={"count": 3}) as w:
    listed = numbers(count=w.parameters.count)
    squares = square.map(n=listed.result)  # fan-out: one item per number (withParam)
    done = report(count=w.parameters.count)  # fan-in: runs once every item succeeded
    listed >> squares >> done
    biggest = largest(values=listed.result, when=listed.result != [])
    listed >> biggest


def main() -> None:
    if "--run" not in sys.argv:
        print(w.to_yaml(), end="")
        return
    with wo.dev() as cluster:
        run = cluster.submit(w)
        print(run.wait(timeout=120), run.result("square"), run.result("largest"))


if __name__ == "__main__":
    main()
