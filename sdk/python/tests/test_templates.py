"""Shared templates: one applied to the cluster, run whole by a workflow and called by reference
one template at a time."""

from __future__ import annotations

import workflow_operator as wo


@wo.script()
def greet(name: str, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


@wo.script()
def shout(text: str) -> str:
    return text.upper()


with wo.WorkflowTemplate("greetings", parameters={"who": "world"}) as library:
    first = greet(name=library.parameters.who)
    first >> shout(text=first.result)


def test_a_shared_template_runs_whole_and_by_reference(workflow_cluster: wo.DevCluster) -> None:
    workflow_cluster.apply(library)
    workflow_cluster.apply(library)  # applying again replaces it

    with wo.Workflow(generate_name="whole-", workflow_template=library) as whole:
        pass
    assert whole.to_manifest()["spec"] == {"workflowTemplateRef": {"name": "greetings"}}

    by_ref = greet.by_reference("greetings")
    with wo.Workflow(generate_name="by-ref-") as calls:
        one = by_ref(name="reference", punctuation="?")
        two = by_ref(name="default", step_name="second")
        one >> two
    manifest = calls.to_manifest()["spec"]
    assert "templates" not in manifest, "a call by reference copies no template"
    assert manifest["containers"][0]["templateRef"] == {"name": "greetings", "template": "greet"}

    ran_whole = workflow_cluster.submit(whole, parameters={"who": "team"})
    ran_calls = workflow_cluster.submit(calls)
    assert ran_whole.wait(timeout=60) == "Completed", ran_whole.message
    assert ran_whole.result("shout") == "HELLO TEAM!"
    assert ran_calls.wait(timeout=60) == "Completed", ran_calls.message
    assert ran_calls.result("greet") == "hello reference?"
    assert ran_calls.result("second") == "hello default!"


def test_a_script_called_outside_a_workflow_is_the_plain_function() -> None:
    assert greet("you") == "hello you!"
    assert shout(text="a") == "A"
