//! The rules stage (`spec.rules`): after the runs' Jobs were seen and before any step starts,
//! the rules read the steps' metrics (measured from those Jobs) and decide what fires; the
//! parallelism and the runs in force follow, and a `finish` or `fail` ends the workflow as a
//! stop or a failure does. Skipped without rules.

use crate::crd::OptionNum;
use crate::dag::Dag;
use crate::rules as rule_stage;

use super::ObservedJob;
use super::planner::{Planner, View};

impl<'a> Planner<'a> {
    /// Decides the rules on the runs `mains` (seen from `main_jobs`), adding the view of any
    /// run a `repeat` added.
    pub(super) fn apply_rules(
        &mut self,
        dag: &'a Dag,
        main_jobs: &[&'a ObservedJob],
        mains: &mut Vec<View<'a>>,
    ) {
        if self.rules.is_empty() {
            return;
        }
        let (metrics, completions) =
            super::rules_metrics::measure(self.rules.steps(), main_jobs.iter().copied());
        let elapsed = self
            .started_at
            .map_or(0, |at| self.now.duration_since(at).as_secs().max(0));
        let facts = rule_stage::Facts {
            metrics: &metrics,
            runs_completed: count(mains.iter().filter(|v| v.progress.all_done())),
            runs_failed: count(mains.iter().filter(|v| !v.failures.is_empty())),
            elapsed,
            completions,
        };
        let same_run = self.previous.run.as_deref() == Some(self.run);
        let stored: &[crate::crd::RuleStatus] = if same_run { &self.previous.rules } else { &[] };
        let standing = rule_stage::Standing {
            parallelism: self.parallelism,
            runs: self.runs,
        };
        let spec = &self.workflow.spec;
        let decision = rule_stage::decide(&spec.rules, self.rules, stored, standing, &facts);
        self.parallelism = decision.parallelism;
        let runs = spec.run_count() + decision.added_runs;
        if runs > self.runs {
            let from = self.runs;
            self.runs = runs;
            mains.extend(self.assess_runs(dag, main_jobs, from));
        }
        self.ruled = Some((decision, metrics));
    }

    /// The firing of a `finish` rule, once one fired: the workflow stops as with
    /// `shutdown: Stop`.
    pub(super) fn finishing(&self) -> Option<&str> {
        self.ruled.as_ref()?.0.finish.as_deref()
    }

    /// The firing of a `fail` rule, once one fired: the workflow fails.
    pub(super) fn failed_by_rule(&self) -> Option<String> {
        let fired = self.ruled.as_ref()?.0.fail.as_deref()?;
        Some(format!("rule {fired}"))
    }

    /// What the status says of the rules: this pass's decision, else what was stored.
    pub(super) fn rules_status(
        &self,
    ) -> (
        Vec<crate::crd::RuleStatus>,
        Option<i32>,
        crate::crd::Metrics,
    ) {
        match &self.ruled {
            Some((decision, metrics)) => (
                decision.statuses.clone(),
                // Absent when back at the spec's: the spec's is the parallelism then.
                decision
                    .parallelism
                    .filter(|p| Some(*p) != self.workflow.spec.parallelism.num()),
                metrics.clone(),
            ),
            None => (
                self.previous.rules.clone(),
                self.previous.parallelism,
                self.previous.metrics.clone(),
            ),
        }
    }
}

fn count<T>(items: impl Iterator<Item = T>) -> u32 {
    u32::try_from(items.count()).unwrap_or(u32::MAX)
}
