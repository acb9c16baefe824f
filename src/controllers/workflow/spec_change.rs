//! Which fields of the run a spec change changed, for the Event of the new run it starts: the
//! spec as last handled is rebuilt from the update handler's diff (the framework keeps the old
//! value of each changed leaf, or says it no longer knows it) and compared with the new one
//! by the core's own decision of what is part of the run (`fields::changed`).

use kube_kopf::causes::Change;
use serde_json::Value;
use workflow_operator_core::crd::{WorkFlow, WorkFlowSpec};
use workflow_operator_core::fields;

/// The run's fields that changed from the spec as last handled to `workflow`'s, or `None`
/// when the diff does not tell (no diff: not a spec update; an old value no longer known).
pub(super) fn changed_fields(workflow: &WorkFlow, diff: &[Change]) -> Option<Vec<String>> {
    if diff.is_empty() {
        return None;
    }
    let mut object = serde_json::json!({ "spec": serde_json::to_value(&workflow.spec).ok()? });
    for change in diff {
        let (last, parents) = change.path.split_last()?;
        if parents.is_empty() {
            // The whole spec changed, and its old value is a digest: the detail is gone.
            return None;
        }
        let parent = parents
            .iter()
            .try_fold(&mut object, |v, key| v.get_mut(key))?;
        let Value::Object(parent) = parent else {
            return None;
        };
        match &change.old {
            Some(old) => parent.insert(last.clone(), old.clone()),
            None => parent.remove(last),
        };
    }
    let old: WorkFlowSpec = serde_json::from_value(object["spec"].take()).ok()?;
    Some(fields::changed(&old, &workflow.spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &[&str], old: Option<Value>, new: Option<Value>) -> Change {
        Change {
            path: path.iter().map(|s| s.to_string()).collect(),
            old,
            new,
        }
    }

    #[test]
    fn the_changed_fields_of_the_run_are_named_from_the_diff() {
        let builder = || WorkFlow::test("w").step("a", &[]).step("c", &["a"]);
        let old = builder().build();
        let new = builder()
            .command(&["sh", "-c", "echo v2"])
            .parallelism(2)
            .build();
        let containers = |wf: &WorkFlow| serde_json::to_value(&wf.spec.containers).ok();
        let diff = [
            change(&["spec", "containers"], containers(&old), containers(&new)),
            change(&["spec", "parallelism"], None, Some(2.into())),
        ];
        assert_eq!(
            changed_fields(&new, &diff),
            Some(vec!["steps.c.command".to_string()])
        );
        assert_eq!(changed_fields(&new, &[]), None, "no spec update");
        let forgotten = [change(&["spec"], None, Some(Value::Null))];
        assert_eq!(
            changed_fields(&new, &forgotten),
            None,
            "the old spec is not known"
        );
    }
}
