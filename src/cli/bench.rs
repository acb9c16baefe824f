//! `workflow-operator bench`: the end-to-end benchmark of [`crate::bench`], from the command
//! line; prints one JSON object. `make bench` runs it on a release build.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::bench::cron::CronOptions;
use crate::bench::replicas::Replicas;
use crate::bench::{self, Idle, OperatorUnderTest, Options, Shape, process::Spawn};

/// Options of `bench` (its help text is on `Command::Bench`).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workflows submitted at once.
    #[arg(long, default_value_t = 100)]
    workflows: usize,
    /// Steps per workflow.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// How the steps depend on each other: chain, fan (one root, a join), diamond (a lattice of
    /// sqrt(steps) wide layers, two dependencies each) or random (up to 3 dependencies each).
    #[arg(long, default_value = "diamond", value_parser = parse_shape)]
    shape: Shape,
    /// Seed of the random shape.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// How long each simulated pod runs, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pod_millis: u64,
    /// Do not start our operator: wait for another one, started against the printed
    /// KUBECONFIG (use --port/--kubeconfig to know it in advance), serving the same CRD.
    #[arg(long)]
    external: bool,
    /// With --external: the operator's process id, to report its CPU and memory.
    #[arg(long, requires = "external")]
    external_pid: Option<u32>,
    /// With --external: how long to wait for it to watch workflows, in seconds.
    #[arg(long, default_value_t = 300)]
    external_wait_secs: u64,
    /// Handlers our operator runs at once (`run --concurrency`).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Where our operator's stderr goes (default: a file in the temporary directory).
    #[arg(long)]
    operator_log: Option<PathBuf>,
    /// An argument for our operator's `run` (repeatable), e.g. `--operator-arg=--no-step-events`.
    #[arg(long = "operator-arg", value_name = "ARG", allow_hyphen_values = true)]
    operator_args: Vec<String>,
    /// Every workflow holds one semaphore of this limit for its whole run
    /// (`spec.synchronization`): at most N workflows run at once.
    #[arg(long, value_name = "LIMIT")]
    semaphore: Option<u32>,
    /// Every step is cached under this key (`cache.key`), `{i}` replaced by the workflow's
    /// index: `--cache-key k` makes every workflow after the first hit the cache, `k{i}` none.
    #[arg(long, value_name = "KEY")]
    cache_key: Option<String>,
    /// Our operator's `run --max-running-steps` (the built-in queue): at most N steps at once.
    #[arg(long, value_name = "N")]
    max_running_steps: Option<u32>,
    /// Our operator's log filter.
    #[arg(long, default_value = "warn")]
    operator_log_filter: String,
    /// Port of the control plane on 127.0.0.1 (0: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the control plane's kubeconfig (default: a temporary file).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the workflows.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Seconds to measure the control plane's ceiling for, before the operator starts (0 skips).
    #[arg(long, default_value_t = 2.0)]
    ceiling_secs: f64,
    /// Concurrent loops of the ceiling measurement.
    #[arg(long, default_value_t = 8)]
    ceiling_workers: usize,
    /// Workflow creates in flight at once.
    #[arg(long, default_value_t = 16)]
    submit_concurrency: usize,
    /// Submit this many workflows per second instead of all at once (latency below saturation).
    #[arg(long, value_name = "PER_SECOND")]
    submit_rate: Option<f64>,
    /// Give up waiting for the workflows after this many seconds (the report says so).
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Target 4: run N workflows to the end (N overrides --workflows), then measure the
    /// operator sitting on them for --idle-secs.
    #[arg(long, value_name = "N")]
    keep_finished: Option<usize>,
    /// Seconds of the idle measurement of --keep-finished and --crons (0 with --crons: no
    /// idle measurement, the CronWorkFlows are not suspended).
    #[arg(long, default_value_t = 10)]
    idle_secs: u64,
    /// With --keep-finished: restart the operator before the idle measurement, so it starts on
    /// the finished workflows.
    #[arg(long, requires = "keep_finished")]
    restart_before_idle: bool,
    /// The schedule shape: create N CronWorkFlows of `@every --cron-period-secs`, spread over
    /// one period, each run one step; report each run's lateness after its scheduled time, runs
    /// per second, and the operator's CPU and memory, idle ones (the CronWorkFlows suspended,
    /// for --idle-secs) included. The workflow options above do not apply.
    #[arg(long, value_name = "N", conflicts_with_all = ["keep_finished", "semaphore", "submit_rate"])]
    crons: Option<usize>,
    /// With --crons: the period of every CronWorkFlow, in seconds.
    #[arg(long, default_value_t = 60, requires = "crons")]
    cron_period_secs: u64,
    /// With --crons: how long to measure, in seconds from the first creation.
    #[arg(long, default_value_t = 180, requires = "crons")]
    cron_duration_secs: u64,
    /// Run our operator as this many processes sharing the work by `--shards` (`run
    /// --shards`); the run starts once the shards are spread over them, and each one's CPU and
    /// peak memory is reported (`operator` is replica 0, `replicas` the others).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    replicas: u16,
    /// The shards of `--replicas` (default: one per replica).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    shards: Option<u32>,
    /// The artifact shape: put one file of N MiB of random bytes into the embedded artifact
    /// store and get it back, as two steps pass an artifact, alternating with `cp` of the same
    /// file, --rounds times; report each time, the medians and their ratios to `cp`. The
    /// workflow options above do not apply.
    #[arg(long, value_name = "N", conflicts_with_all = ["crons", "keep_finished"])]
    artifact_mib: Option<usize>,
    /// With --artifact-mib: how many rounds.
    #[arg(long, default_value_t = 5, requires = "artifact_mib")]
    rounds: usize,
    /// Print the JSON indented.
    #[arg(long)]
    pretty: bool,
}

fn parse_shape(text: &str) -> Result<Shape, String> {
    text.parse()
}

/// Runs the benchmark and prints its report; exits 1 when a workflow failed or the run timed
/// out (the report is printed all the same).
pub async fn bench(args: BenchArgs) -> ExitCode {
    if let Some(crons) = args.crons {
        return schedule(&args, crons).await;
    }
    if let Some(mib) = args.artifact_mib {
        return match bench::artifact::run(mib, args.rounds).await {
            Ok(report) => {
                print(&report, args.pretty);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let options = match options(&args) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let report = match bench::run(options).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print(&report, args.pretty);
    if report.timed_out || report.workflows_failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The schedule shape (`--crons`): exits 1 when a scheduled time in the window had no run, or
/// more than one, or one before its time (the report is printed all the same).
async fn schedule(args: &BenchArgs, crons: usize) -> ExitCode {
    if args.cron_period_secs == 0 {
        eprintln!("error: --cron-period-secs must be at least 1");
        return ExitCode::FAILURE;
    }
    let operator = match operator(args) {
        Ok(operator) => operator,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let options = CronOptions {
        crons,
        period: Duration::from_secs(args.cron_period_secs),
        duration: Duration::from_secs(args.cron_duration_secs),
        idle: (args.idle_secs > 0).then(|| Duration::from_secs(args.idle_secs)),
        pod_millis: args.pod_millis,
        operator,
        port: args.port,
        kubeconfig: args.kubeconfig.clone(),
        namespace: args.namespace.clone(),
        submit_concurrency: args.submit_concurrency,
    };
    let report = match bench::cron::run(options).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print(&report, args.pretty);
    if report.runs_missing > 0 || report.runs_duplicated > 0 || report.runs_early > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print(report: &impl serde::Serialize, pretty: bool) {
    let json = if pretty {
        serde_json::to_string_pretty(report)
    } else {
        serde_json::to_string(report)
    };
    println!("{}", json.expect("reports serialize"));
}

fn options(args: &BenchArgs) -> Result<Options, String> {
    if args.steps == 0 {
        return Err("--steps must be at least 1".into());
    }
    let operator = operator(args)?;
    Ok(Options {
        workflows: args.keep_finished.unwrap_or(args.workflows),
        steps: args.steps,
        shape: args.shape,
        seed: args.seed,
        pod_millis: args.pod_millis,
        operator,
        port: args.port,
        kubeconfig: args.kubeconfig.clone(),
        namespace: args.namespace.clone(),
        ceiling: (args.ceiling_secs > 0.0).then(|| Duration::from_secs_f64(args.ceiling_secs)),
        ceiling_workers: args.ceiling_workers,
        submit_concurrency: args.submit_concurrency,
        submit_rate: args.submit_rate.filter(|rate| *rate > 0.0),
        semaphore: args.semaphore,
        cache_key: args.cache_key.clone(),
        replicas: Replicas {
            count: usize::from(args.replicas),
            shards: args.shards.unwrap_or(u32::from(args.replicas)),
        },
        timeout: Duration::from_secs(args.timeout_secs),
        idle: args.keep_finished.map(|_| Idle {
            duration: Duration::from_secs(args.idle_secs),
            restart: args.restart_before_idle,
        }),
    })
}

/// The operator measured: ours, started from this same binary, or `--external`.
fn operator(args: &BenchArgs) -> Result<OperatorUnderTest, String> {
    Ok(if args.external {
        OperatorUnderTest::External {
            pid: args.external_pid,
            wait: Duration::from_secs(args.external_wait_secs),
        }
    } else {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program's path to start the operator: {e}"))?;
        let log = args.operator_log.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "workflow-operator-bench-{}.log",
                std::process::id()
            ))
        });
        OperatorUnderTest::Spawn(Spawn {
            exe,
            concurrency: args.concurrency,
            log_filter: args.operator_log_filter.clone(),
            log,
            extra_args: args
                .max_running_steps
                .map(|n| vec!["--max-running-steps".to_string(), n.to_string()])
                .unwrap_or_default()
                .into_iter()
                .chain(args.operator_args.iter().cloned())
                .collect(),
        })
    })
}
