"""The SDK's first example: two Python functions as steps, the second given the first's result.

`python examples/python/hello.py` prints the manifest; with `--run` it runs it on the embedded
control plane (`workflow-operator` from `$WORKFLOW_OPERATOR_BIN`, else the PATH).
"""

from __future__ import annotations

import sys

import workflow_operator as wo


@wo.script(image="python:3.12")
def hello(name: str) -> str:
    return "hello " + name


@wo.script(image="python:3.12")
def shout(text: str) -> str:
    return text.upper()


with wo.Workflow(generate_name="py-", parameters={"who": "world"}) as w:
    a = hello(name=w.parameters.who)
    b = shout(text=a.result)
    a >> b


def main() -> None:
    if "--run" not in sys.argv:
        print(w.to_yaml(), end="")
        return
    with wo.dev() as cluster:
        run = cluster.submit(w)
        print(run.wait(timeout=120), run.result("shout"))


if __name__ == "__main__":
    main()
