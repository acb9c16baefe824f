//! A step's metrics across runs, items and attempts, measured from its Jobs on every pass:
//! nothing is kept between passes, so a restarted operator reads the same numbers.

use k8s_openapi::jiff::Timestamp;

use crate::crd::{Durations, Metrics, StepMetrics};

use super::{JobState, ObservedJob};

/// The metrics of `steps` and the step completions (finished Jobs of every step), from
/// `jobs`: the Jobs of the workflow's steps in the current run id.
pub fn measure<'j>(
    steps: &[String],
    jobs: impl IntoIterator<Item = &'j ObservedJob>,
) -> (Metrics, u64) {
    let mut metrics: Metrics = steps
        .iter()
        .map(|s| (s.clone(), StepMetrics::default()))
        .collect();
    let mut times = vec![RunTimes::default(); steps.len()];
    let mut completions = 0u64;
    for job in jobs {
        let finished = !matches!(job.state, JobState::Active { .. });
        completions += u64::from(finished);
        let Some(i) = steps.iter().position(|s| *s == job.step) else {
            continue;
        };
        let m = metrics
            .get_mut(&job.step)
            .expect("every measured step has metrics");
        match job.state {
            JobState::Active { .. } => m.running += 1,
            JobState::Succeeded => m.succeeded += 1,
            _ => m.failed += 1,
        }
        m.attempts += u32::try_from(job.attempts.max(0)).unwrap_or(0);
        let (Some(start), Some(end), true) = (job.start_time, job.finished_at, finished) else {
            continue;
        };
        let seconds = end.duration_since(start).as_secs_f64().max(0.0);
        let d = m.duration.get_or_insert(Durations {
            mean: 0.0,
            min: seconds,
            max: seconds,
            last: seconds,
        });
        d.min = d.min.min(seconds);
        d.max = d.max.max(seconds);
        let times = &mut times[i];
        times.sum += seconds;
        times.count += 1;
        if times.last.is_none_or(|(at, _)| end >= at) {
            times.last = Some((end, seconds));
        }
    }
    for (step, times) in steps.iter().zip(times) {
        if let Some(d) = metrics.get_mut(step).and_then(|m| m.duration.as_mut()) {
            // Kept to the millisecond: the status holds it, and Jobs' times are whole seconds.
            d.mean = (times.sum / f64::from(times.count) * 1000.0).round() / 1000.0;
            d.last = times.last.map_or(d.last, |(_, s)| s);
        }
    }
    (metrics, completions)
}

/// The run times of one measured step's finished Jobs.
#[derive(Debug, Clone, Copy, Default)]
struct RunTimes {
    /// Their sum, in seconds.
    sum: f64,
    /// How many.
    count: u32,
    /// When the last to finish did, and its run time.
    last: Option<(Timestamp, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::WorkFlow;
    use k8s_openapi::jiff::SignedDuration;

    fn at(seconds: i64) -> Timestamp {
        "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
    }

    fn job(step: &str, state: JobState, ran: Option<(i64, i64)>, attempts: i32) -> ObservedJob {
        let workflow = WorkFlow::test("w").step(step, &[]).build();
        let mut job = crate::testing::Jobs::of(&workflow)
            .succeeded(step)
            .build()
            .remove(0);
        job.state = state;
        job.start_time = ran.map(|(start, _)| at(start));
        job.finished_at = ran.map(|(_, end)| at(end));
        job.attempts = attempts;
        job
    }

    #[test]
    fn metrics_are_measured_from_the_jobs_across_runs_and_items() {
        let failed = JobState::Failed {
            reason: "BackoffLimitExceeded".into(),
            message: String::new(),
            exit_code: Some(1),
        };
        let jobs = [
            job("lammps", JobState::Succeeded, Some((0, 10)), 1),
            job("lammps", JobState::Succeeded, Some((5, 35)), 1),
            job("lammps", failed, Some((40, 60)), 3),
            job(
                "lammps",
                JobState::Active { since: at(50) },
                Some((50, 0)),
                1,
            ),
            job("post", JobState::Succeeded, Some((0, 1)), 1),
        ];
        let (metrics, completions) = measure(&["lammps".to_string()], &jobs);
        assert_eq!(completions, 4);
        assert_eq!(
            metrics["lammps"],
            StepMetrics {
                succeeded: 2,
                failed: 1,
                running: 1,
                attempts: 6,
                duration: Some(Durations {
                    mean: 20.0,
                    min: 10.0,
                    max: 30.0,
                    last: 20.0,
                }),
            }
        );
        assert!(!metrics.contains_key("post"));
    }
}
