//! After a step's command succeeded: its outputs, read from where it left them.

use std::collections::BTreeMap;

use workflow_operator_core::agent::{self, Report, Task};
use workflow_operator_core::outputs;

/// The report of a command that succeeded: its `key=value` lines, its output parameters and,
/// when kept, its standard output (`stdout`, or why it cannot be).
///
/// # Errors
/// What cannot be read, naming it: a parameter's missing file (without a `default`), lines
/// that are not `key=value`, a standard output that is not text.
pub fn report(task: &Task, stdout: Result<Option<Vec<u8>>, String>) -> Result<Report, String> {
    let stdout = stdout?;
    let lines = std::fs::read_to_string(agent::OUTPUTS_FILE).unwrap_or_default();
    let lines = outputs::parse(&lines).map_err(|e| format!("the step's {e}"))?;
    let mut parameters = BTreeMap::new();
    for parameter in &task.parameters {
        let value = match std::fs::read(&parameter.path) {
            Ok(bytes) => text(bytes, &format!("output parameter {}", parameter.name))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                match &parameter.default {
                    Some(default) => default.clone(),
                    None => {
                        return Err(format!(
                            "output parameter {}: {} does not exist (and it has no default)",
                            parameter.name, parameter.path
                        ));
                    }
                }
            }
            Err(error) => {
                return Err(format!(
                    "output parameter {}: reading {}: {error}",
                    parameter.name, parameter.path
                ));
            }
        };
        parameters.insert(parameter.name.clone(), value);
    }
    let result = stdout
        .map(|bytes| text(bytes, "the standard output (result)"))
        .transpose()?;
    Ok(Report {
        outputs: agent::merge_outputs(lines, parameters, result),
    })
}

/// `bytes` as text without its trailing newline (as Argo's `result`, and as `$(cat file)`
/// reads a file).
fn text(bytes: Vec<u8>, what: &str) -> Result<String, String> {
    let mut text = String::from_utf8(bytes).map_err(|_| format!("{what} is not UTF-8 text"))?;
    while text.ends_with('\n') || text.ends_with('\r') {
        text.pop();
    }
    Ok(text)
}
