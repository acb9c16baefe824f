//! A CronWorkflow's spec as a CronWorkFlow's: the schedule fields by the table, the history
//! limits renamed, the runs' spec converted as a Workflow's.

use serde_json::{Map, Value, json};

use super::spec::{self, Use};
use super::table::Place;
use super::walk::{self, Report};

/// Converts a CronWorkflow's `spec` at path `at`.
pub fn cron_spec(spec: &Value, at: &str, report: &mut Report) -> Value {
    Value::Object(walk::fields(
        Place::Cron,
        spec,
        at,
        report,
        |field, value, path, out, report| match field {
            "schedule" => {
                out.insert("schedules".into(), json!([value]));
            }
            "workflowMetadata" => {
                let kept: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| ["labels", "annotations"].contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                out.insert(field.into(), Value::Object(kept));
            }
            _ => {
                out.insert(
                    field.into(),
                    spec::workflow_spec(value, path, Use::Workflow, report),
                );
            }
        },
    ))
}
