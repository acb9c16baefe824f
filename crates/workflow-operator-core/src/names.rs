//! Deterministic Kubernetes names, label values and run ids for workflows and their steps.
//!
//! A step name may be any text (upper case, `_`, unicode, hundreds of characters); the names
//! derived here are always valid, and distinct inputs never collide by sanitising or truncation
//! because every derived name that differs from its input carries a hash of the exact input.
//! Used by `jobs` (Job, container and label names) and `plan` (the run id and Job names).

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::crd::{Step, WorkFlowSpec};
use super::fields::{self, Change, Field};

/// Longest DNS-1123 label (Job names, container names) and label value.
pub const MAX_LABEL: usize = 63;

/// Hex digits of hash appended to shortened names: 40 bits, so a collision among the Jobs of
/// one namespace is about one in a trillion.
const HASH_LEN: usize = 10;

/// Hex digits of a run id.
const RUN_ID_LEN: usize = 10;

/// The first `len` hex digits of the SHA-256 of `parts`, each length-prefixed so that
/// `("ab", "c")` and `("a", "bc")` differ.
fn short_hash(parts: &[&str], len: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(len);
    for byte in digest.iter() {
        hex.push_str(&format!("{byte:02x}"));
        if hex.len() >= len {
            break;
        }
    }
    hex.truncate(len);
    hex
}

/// Whether `s` is a DNS-1123 label: 1-63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// Whether `s` is a valid label value: empty, or 1-63 of `[A-Za-z0-9_.-]` starting and ending
/// alphanumeric.
pub fn is_label_value(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.is_empty()
        || (bytes.len() <= MAX_LABEL
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric())
}

/// Lower-cases `s` and replaces every run of characters outside `[a-z0-9]` by one `-`, with no
/// `-` at either end.
fn dns_sanitise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// `base` cut to at most `max` bytes (ASCII only here), with no `-` left at its end.
fn cut(mut base: String, max: usize) -> String {
    base.truncate(max);
    while base.ends_with(['-', '_', '.']) {
        base.pop();
    }
    base
}

/// `base-hash`, or just `hash` when `base` is empty; at most 63 characters.
fn with_hash(base: String, hash: String) -> String {
    let base = cut(base, MAX_LABEL - 1 - hash.len());
    if base.is_empty() {
        hash
    } else {
        format!("{base}-{hash}")
    }
}

/// `s` itself when it is a DNS-1123 label, else a sanitised, shortened form plus a hash of `s`.
/// Used for container names.
pub fn dns_label(s: &str) -> String {
    if is_dns_label(s) {
        return s.to_string();
    }
    with_hash(dns_sanitise(s), short_hash(&[s], HASH_LEN))
}

/// `s` itself when it is a valid label value, else its valid characters, shortened, plus a hash
/// of `s`, so the value stays recognisable and distinct inputs give distinct values.
pub fn label_value(s: &str) -> String {
    if is_label_value(s) {
        return s.to_string();
    }
    let mut base: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    // A label value must start with an alphanumeric character.
    let start = base
        .find(|c: char| c.is_ascii_alphanumeric())
        .unwrap_or(base.len());
    base.drain(..start);
    with_hash(base, short_hash(&[s], HASH_LEN))
}

/// The Job name of `step` of workflow `workflow` in run `run`: `<workflow>-<step>-<hash>`,
/// lower-cased, sanitised and shortened to a DNS-1123 label of at most 63 characters. The hash
/// covers the exact three inputs, so the name is deterministic (a retried create is idempotent)
/// and each run's Jobs are distinct from the previous run's.
pub fn job_name(workflow: &str, step: &str, run: &str) -> String {
    let wf = dns_sanitise(workflow);
    let st = dns_sanitise(step);
    let base = match (wf.is_empty(), st.is_empty()) {
        (false, false) => format!("{wf}-{st}"),
        (false, true) => wf,
        (true, _) => st,
    };
    with_hash(base, short_hash(&[workflow, step, run], HASH_LEN))
}

/// The WorkFlow a CronWorkFlow `cron` starts for the time `scheduled` (unix seconds):
/// `<cron>-<scheduled>`, the cron's name shortened with a hash when the whole would be longer
/// than a label (63). The same inputs always give the same name, so creating a run is
/// idempotent: a second create for one time is refused by the API server as a duplicate.
pub fn cron_run_name(cron: &str, scheduled: i64) -> String {
    let suffix = format!("-{scheduled}");
    if cron.len() + suffix.len() <= MAX_LABEL {
        return format!("{cron}{suffix}");
    }
    let hash = short_hash(&[cron], HASH_LEN);
    let base = cut(cron.to_string(), MAX_LABEL - suffix.len() - 1 - hash.len());
    format!("{base}-{hash}{suffix}")
}

/// The name of the run a WorkFlowTrigger starts for the delivery `id`: `<trigger>-<hash>`, the
/// hash over the trigger's name and the id, so the same delivery always names the same run
/// (a repeated delivery finds it) and distinct ones distinct runs.
pub fn trigger_run_name(trigger: &str, id: &str) -> String {
    with_hash(dns_sanitise(trigger), short_hash(&[trigger, id], HASH_LEN))
}

/// A short hash of `parts` (each counted with its length, so `["ab", "c"]` and `["a", "bc"]`
/// differ).
pub fn hash_of(parts: &[&str]) -> String {
    short_hash(parts, HASH_LEN)
}

/// The name of the workspace claim (`spec.workspace`) of run `run` of `workflow`:
/// `<workflow>-ws-<hash>`, the hash over a key no step's Job name can have.
pub fn workspace_claim_name(workflow: &str, run: &str) -> String {
    let base = format!("{}-ws", dns_sanitise(workflow));
    with_hash(base, short_hash(&[workflow, "\0workspace", run], HASH_LEN))
}

/// The Job name of `step` in retry `retry` of run `run`: [`job_name`] for retry 0 (a workflow
/// never retried keeps the names it always had), otherwise a name whose hash covers the retry
/// too, so that a retried step never reuses the name of its failed Job. A run id is hex digits,
/// so `<run>+retry<n>` is no other run's id.
pub fn retry_job_name(workflow: &str, step: &str, run: &str, retry: i32) -> String {
    if retry == 0 {
        job_name(workflow, step, run)
    } else {
        job_name(workflow, step, &format!("{run}+retry{retry}"))
    }
}

/// The Job name of attempt `attempt` (`retryStrategy`) of `step` in retry `retry` of run
/// `run`: [`retry_job_name`] for the first attempt, otherwise a name whose hash covers the
/// attempt too, so each attempt is a Job of its own.
pub fn attempt_job_name(workflow: &str, step: &str, run: &str, retry: i32, attempt: u32) -> String {
    if attempt == 0 {
        retry_job_name(workflow, step, run, retry)
    } else {
        job_name(
            workflow,
            step,
            &format!("{run}+retry{retry}+attempt{attempt}"),
        )
    }
}

/// A short stable id of what runs: the fields [`fields`] names part of the run ([`Change::Run`]
/// always, [`Change::RunWhenSet`] when set) of the workflow, its steps and exit steps. Limits
/// and run control are left out, so changing them applies to the running workflow instead of
/// starting a new run. Steps are hashed in name order and dependencies as a set: the order of
/// `containers` and of each `dependsOn`, and a dependency listed twice, do not matter.
pub fn run_id(spec: &WorkFlowSpec) -> String {
    short_hash(&[&run_key_json(spec)], RUN_ID_LEN)
}

/// What [`run_id`] hashes: a JSON object of the hashed fields, in the order [`fields`] visits
/// them.
fn run_key_json(spec: &WorkFlowSpec) -> String {
    let mut key = RunKey::default();
    fields::visit_spec(spec, &mut key);
    key.finish()
}

/// Writes the hashed fields of a value as a JSON object.
#[derive(Default)]
struct RunKey {
    json: String,
}

impl RunKey {
    fn finish(mut self) -> String {
        if self.json.is_empty() {
            self.json.push('{');
        }
        self.json.push('}');
        self.json
    }

    fn member(&mut self, key: &str, value: &str) {
        self.json.push(if self.json.is_empty() { '{' } else { ',' });
        self.json.push('"');
        self.json.push_str(key);
        self.json.push_str("\":");
        self.json.push_str(value);
    }

    fn hashed(field: &Field, set: bool) -> bool {
        match field.change {
            Change::Run => true,
            Change::RunWhenSet => set,
            Change::Expanded | Change::InPlace => false,
        }
    }
}

impl fields::Visitor for RunKey {
    fn field<T: Serialize + ?Sized>(&mut self, field: &Field, value: &T, set: bool) {
        if Self::hashed(field, set) {
            let value = serde_json::to_string(value).expect("plain data serialises to JSON");
            self.member(field.key, &value);
        }
    }

    fn steps(&mut self, field: &Field, steps: &[Step]) {
        if !Self::hashed(field, !steps.is_empty()) {
            return;
        }
        let mut keyed: Vec<(&str, String)> = steps
            .iter()
            .map(|step| {
                let mut key = RunKey::default();
                fields::visit_step(step, &mut key);
                (step.step_name.as_str(), key.finish())
            })
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(b.0));
        let list: Vec<String> = keyed.into_iter().map(|(_, json)| json).collect();
        self.member(field.key, &format!("[{}]", list.join(",")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use rstest::rstest;

    use crate::crd::WorkFlow;

    fn long(c: char, n: usize) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    #[rstest]
    #[case("diamond", "step0")]
    #[case("diamond", "STEP_0")]
    #[case("diamond", "Ünïcødé ステップ")]
    #[case("diamond", "ステップ")]
    #[case("diamond", "---")]
    #[case("diamond", "")]
    #[case("a.b.c", "x")]
    #[case(&long('w', 253), &long('S', 300))]
    #[case(&long('w', 253), "a")]
    #[case("w", &long('_', 300))]
    fn job_names_are_dns_labels(#[case] workflow: &str, #[case] step: &str) {
        let name = job_name(workflow, step, "0123456789");
        assert!(is_dns_label(&name), "{name:?} ({} chars)", name.len());
        assert_eq!(
            name,
            job_name(workflow, step, "0123456789"),
            "deterministic"
        );
    }

    #[test]
    fn bug8_long_uppercase_underscore_step_names_give_valid_job_names() {
        let wf = WorkFlow::test("My-Workflow-Name-That-Is-Quite-Long-Indeed-And-Longer-Still")
            .step(&format!("EXTRACT_{}", long('X', 290)), &[])
            .step(
                "Load_Data_Into_The_Warehouse_Step_Number_One_Hundred_And_Twenty",
                &[],
            )
            .build();
        let run = run_id(&wf.spec);
        for step in &wf.spec.containers {
            let name = job_name(wf.metadata.name.as_deref().unwrap(), &step.step_name, &run);
            assert!(is_dns_label(&name), "{name:?}");
            assert!(
                is_dns_label(&dns_label(&step.step_name)),
                "container name of {name:?}"
            );
        }
    }

    #[test]
    fn job_name_keeps_readable_names_readable() {
        let name = job_name("diamond", "step0", "abc");
        assert!(name.starts_with("diamond-step0-"), "{name}");
        assert_eq!(name.len(), "diamond-step0-".len() + HASH_LEN);
    }

    #[rstest]
    #[case("Step_A", "step-a")]
    #[case("step.a", "step-a")]
    #[case("STEP-A", "step-a")]
    #[case(&format!("{}1", long('s', 299)), &format!("{}2", long('s', 299)))]
    fn names_that_sanitise_alike_get_distinct_job_names(#[case] a: &str, #[case] b: &str) {
        assert_ne!(job_name("wf", a, "r"), job_name("wf", b, "r"));
    }

    #[test]
    fn job_name_changes_with_the_run() {
        assert_ne!(job_name("wf", "a", "run1"), job_name("wf", "a", "run2"));
    }

    #[rstest]
    #[case("step0", "step0")]
    #[case("Step_0.v2", "Step_0.v2")]
    #[case("", "")]
    fn valid_label_values_are_kept(#[case] input: &str, #[case] want: &str) {
        assert_eq!(label_value(input), want);
    }

    #[rstest]
    #[case("_leading")]
    #[case("trailing-")]
    #[case("with space")]
    #[case("ステップ")]
    #[case(&long('a', 64))]
    #[case(&long('a', 300))]
    fn invalid_label_values_become_valid(#[case] input: &str) {
        let value = label_value(input);
        assert!(is_label_value(&value) && !value.is_empty(), "{value:?}");
        assert_ne!(value, input);
    }

    #[test]
    fn long_label_values_differing_at_the_end_stay_distinct() {
        let a = format!("{}a", long('x', 100));
        let b = format!("{}b", long('x', 100));
        assert_ne!(label_value(&a), label_value(&b));
    }

    #[rstest]
    #[case("step0", true)]
    #[case("a", true)]
    #[case("-a", false)]
    #[case("a-", false)]
    #[case("A", false)]
    #[case("a_b", false)]
    #[case("", false)]
    fn dns_label_check(#[case] s: &str, #[case] valid: bool) {
        assert_eq!(is_dns_label(s), valid);
        assert!(is_dns_label(&dns_label(s)));
        if valid {
            assert_eq!(dns_label(s), s);
        }
    }

    #[test]
    fn run_id_ignores_limits_and_order() {
        let base = WorkFlow::test("wf")
            .step("a", &[])
            .step("b", &["a"])
            .build();
        let limits = WorkFlow::test("wf")
            .step("b", &["a", "a"])
            .timeout(-1)
            .retries(3)
            .step("a", &[])
            .max_step_timeout(5)
            .parallelism(1)
            .fail_fast(false)
            .build();
        assert_eq!(run_id(&base.spec), run_id(&limits.spec));
        assert_eq!(run_id(&base.spec).len(), RUN_ID_LEN);
        // One run, said or not, is the same run.
        let mut once = base.clone();
        once.spec.runs = Some(1);
        assert_eq!(run_id(&base.spec), run_id(&once.spec));
    }

    /// A workflow that uses none of the fields added since the first release hashes the same
    /// key as before them, so an upgraded operator does not start it again.
    #[test]
    fn run_key_of_a_seed_workflow_has_only_the_first_release_fields() {
        let wf = WorkFlow::test("wf").step("a", &[]).build();
        assert_eq!(
            run_key_json(&wf.spec),
            r#"{"steps":[{"name":"a","image":"busybox:1.36","command":["sh","-c","echo a"],"args":null,"env":[],"depends_on":[],"resources":null}]}"#
        );
    }

    proptest! {
        #[test]
        fn any_inputs_give_valid_distinct_job_names(
            wf in "[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?",
            a in "\\PC{1,300}",
            b in "\\PC{1,300}",
        ) {
            let na = job_name(&wf, &a, "r");
            prop_assert!(is_dns_label(&na), "{na:?}");
            prop_assert!(is_label_value(&label_value(&a)));
            prop_assert!(is_dns_label(&dns_label(&a)));
            if a != b {
                prop_assert_ne!(na, job_name(&wf, &b, "r"));
            }
        }
    }
}
