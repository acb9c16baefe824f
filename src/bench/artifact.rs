//! The artifact shape of `bench` (`--artifact-mib N`): one file of N MiB of random bytes put
//! into the embedded store and got back, as a step hands an artifact to the next, alternating
//! with `cp` of the same file on the same disk, round after round. The report gives each
//! round's times and the medians, and the ratios to `cp` that docs/performance.md quotes.
//!
//! The file, the copies and the store's directory are all under the system's temporary
//! directory: one disk, so `cp` is the yardstick of what the disk gives.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use serde::Serialize;

use crate::artifacts::embedded::EmbeddedStore;
use crate::artifacts::{get_path, put_path};

/// The times of one kind of transfer, in seconds: each round's, and their median.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Times {
    pub median_seconds: f64,
    pub seconds: Vec<f64>,
}

impl Times {
    fn of(mut times: Vec<Duration>) -> Times {
        let seconds: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
        times.sort();
        Times {
            median_seconds: times[times.len() / 2].as_secs_f64(),
            seconds,
        }
    }
}

/// What `--artifact-mib` reports.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactReport {
    pub mib: usize,
    pub rounds: usize,
    pub cp: Times,
    pub put: Times,
    pub get: Times,
    /// Median put over median `cp`.
    pub put_over_cp: f64,
    /// Median get over median `cp`.
    pub get_over_cp: f64,
}

/// Runs `rounds` rounds of `cp`, put and get of a `mib` MiB file (each round checks the file
/// got back is the file put).
///
/// # Errors
/// The store does not start, a transfer fails, a file cannot be written or read, or what came
/// back differs.
pub async fn run(mib: usize, rounds: usize) -> anyhow::Result<ArtifactReport> {
    anyhow::ensure!(
        mib > 0 && rounds > 0,
        "--artifact-mib and --rounds must be at least 1"
    );
    let store = EmbeddedStore::start(None).await?;
    let dir = tempfile::Builder::new()
        .prefix("workflow-artifact-bench-")
        .tempdir()?;
    let source = dir.path().join("source.bin");
    random_file(&source, mib << 20)?;
    let (mut cp, mut put, mut get) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let copy = dir.path().join(format!("copy-{round}"));
        cp.push(timed(copy_with_cp(&source, &copy)).await?);
        std::fs::remove_file(&copy)?;

        let key = format!("bench/{round}.tgz");
        put.push(timed(async { put_path(store.target(), &key, &source).await.map(drop) }).await?);
        let got = dir.path().join(format!("got-{round}"));
        get.push(timed(get_path(store.target(), &key, &got)).await?);
        anyhow::ensure!(
            same_bytes(&source, &got)?,
            "round {round}: the file got back differs"
        );
        std::fs::remove_file(&got)?;
    }
    let (cp, put, get) = (Times::of(cp), Times::of(put), Times::of(get));
    Ok(ArtifactReport {
        mib,
        rounds,
        put_over_cp: put.median_seconds / cp.median_seconds,
        get_over_cp: get.median_seconds / cp.median_seconds,
        cp,
        put,
        get,
    })
}

async fn timed<E>(work: impl Future<Output = Result<(), E>>) -> anyhow::Result<Duration>
where
    anyhow::Error: From<E>,
{
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

async fn copy_with_cp(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = tokio::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .await?;
    anyhow::ensure!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
    Ok(())
}

/// `len` bytes that gzip cannot shrink (the worst case for the archive), the same each run.
fn random_file(path: &PathBuf, len: usize) -> std::io::Result<()> {
    let mut random = rand::rngs::StdRng::seed_from_u64(7);
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut block = vec![0; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len());
        random.fill_bytes(&mut block[..n]);
        file.write_all(&block[..n])?;
        left -= n;
    }
    file.flush()
}

/// Whether the two files hold the same bytes (read after the timing, so not counted).
fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    Ok(std::fs::read(a)? == std::fs::read(b)?)
}
