"""A workflow written in Python and the same written in YAML, compared field by field; the
manifest round-trips through `Workflow.from_yaml`."""

from __future__ import annotations

import subprocess

import yaml

import workflow_operator as wo

from .conftest import load_example


@wo.container(image="alpine:3.20", command=["sh", "-c", 'echo "ok=yes" >> "$WORKFLOW_OUTPUTS"'])
def check() -> None: ...


@wo.container(image="busybox:1.36", command=["echo", wo.input("message")], timeout=30)
def say(message: str) -> None: ...


def release() -> wo.Workflow:
    with wo.Workflow(
        "release",
        namespace="ci",
        parameters={"version": "1.4", "target": None},
        labels={"team": "a"},
        spec={"parallelism": 2},
    ) as w:
        ok = check(retries=2)
        builds = say.map(message=["linux", "darwin"], name="build")
        deploy = say(
            message=f"deploy {w.parameters.version}",
            name="deploy",
            when=ok.output("ok") == "yes",
            timeout=60,
        )
        each = say(message=wo.item, name="each", with_items=[1, 2])
        ok >> builds >> deploy
        ok >> each
    return w


RELEASE = """
apiVersion: workflow.crd.com/v1
kind: WorkFlow
metadata: {name: release, namespace: ci, labels: {team: a}}
spec:
  parallelism: 2
  arguments:
    parameters: [{name: version, value: "1.4"}, {name: target}]
  templates:
    - name: say
      inputs: {parameters: [{name: message}]}
      image: busybox:1.36
      command: [echo, "{{inputs.parameters.message}}"]
      timeout: 30
    - name: check
      image: alpine:3.20
      command: [sh, -c, 'echo "ok=yes" >> "$WORKFLOW_OUTPUTS"']
  containers:
    - {stepName: check, template: check, retries: 2}
    - stepName: build
      dependsOn: [check]
      template: say
      withItems: [linux, darwin]
      arguments: {parameters: [{name: message, value: "{{item}}"}]}
    - stepName: deploy
      dependsOn: [build]
      template: say
      when: 'steps["check"].outputs["ok"] == "yes"'
      timeout: 60
      arguments: {parameters: [{name: message, value: "deploy {{workflow.parameters.version}}"}]}
    - stepName: each
      dependsOn: [check]
      template: say
      withItems: [1, 2]
      arguments: {parameters: [{name: message, value: "{{item}}"}]}
"""


def test_python_and_yaml_agree_field_by_field() -> None:
    assert release().diff(wo.Workflow.from_yaml(RELEASE)) == []


def test_a_field_that_differs_is_named() -> None:
    other = wo.Workflow.from_yaml(RELEASE.replace("timeout: 60", "timeout: 61"))
    other.steps["each"].after(other.steps["deploy"])
    assert release().diff(other) == [
        "spec.containers[deploy].timeout: 60 != 61",
        "spec.containers[each].dependsOn: ['check'] != ['check', 'deploy']",
    ]


def test_manifests_round_trip_through_yaml() -> None:
    for w in (release(), load_example("hello").w, load_example("squares").w):
        again = wo.Workflow.from_yaml(w.to_yaml())
        assert again.to_manifest() == w.to_manifest()
        assert again.to_yaml() == w.to_yaml()
    # Steps read from YAML are steps: they take new dependencies and references.
    loaded = wo.Workflow.from_yaml(load_example("hello").w.to_yaml())
    assert loaded.steps["shout"].upstream == [loaded.steps["hello"]]


def test_validate_accepts_the_python_workflow(operator_binary: str) -> None:
    manifest = release().to_manifest()
    # `target` has no value: validate, as the operator, wants one given at submit.
    manifest["spec"]["arguments"]["parameters"][1]["value"] = "linux"
    checked = subprocess.run(
        [operator_binary, "validate", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_lists_on_either_side_of_rshift_make_every_edge() -> None:
    with wo.Workflow(generate_name="edges-") as w:
        a, b, c, d = (say(message=n, name=n) for n in "abcd")
        a >> [b, c] >> d
    depends = {s["stepName"]: s.get("dependsOn") for s in w.to_manifest()["spec"]["containers"]}
    assert depends == {"a": None, "b": ["a"], "c": ["a"], "d": ["b", "c"]}
