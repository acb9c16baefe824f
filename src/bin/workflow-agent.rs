//! `workflow-agent`: the step agent, copied into a step's pod (see
//! `workflow_operator::step_agent`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(workflow_operator::step_agent::main_with(&args));
}
