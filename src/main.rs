//! The `workflow-operator` binary: parses the command line and runs it (see [`workflow_operator::cli`]).

fn main() -> std::process::ExitCode {
    workflow_operator::cli::main()
}
