//! The command line: one subcommand per module, parsed by clap.
