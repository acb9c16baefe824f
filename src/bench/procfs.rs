//! A process's CPU time and memory, read from Linux's `/proc/<pid>/stat` and
//! `/proc/<pid>/status`. [`super::run`] samples the operator process (and itself) with
//! [`sample`].

use std::time::Duration;

/// Clock ticks per second of the times in `/proc/<pid>/stat`: `USER_HZ`, which the kernel fixes
/// at 100 for user space on every architecture this runs on (x86, arm).
const USER_HZ: u64 = 100;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// User plus system CPU time of all its threads so far.
    pub cpu: Duration,
    /// Resident memory now (`VmRSS`), in KiB.
    pub rss_kib: u64,
    /// The highest resident memory so far (`VmHWM`), in KiB.
    pub peak_rss_kib: u64,
}

impl Sample {
    pub fn rss_mib(&self) -> f64 {
        mib(self.rss_kib)
    }

    pub fn peak_rss_mib(&self) -> f64 {
        mib(self.peak_rss_kib)
    }
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// Reads the process `pid` (`"self"` works too).
///
/// # Errors
/// When the process does not exist (or has exited and been reaped) or its files cannot be parsed.
pub fn sample(pid: &str) -> std::io::Result<Sample> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(Sample {
        cpu: cpu_time(&stat).ok_or_else(|| invalid("unparseable /proc/<pid>/stat"))?,
        rss_kib: status_kib(&status, "VmRSS").ok_or_else(|| invalid("no VmRSS"))?,
        peak_rss_kib: status_kib(&status, "VmHWM").ok_or_else(|| invalid("no VmHWM"))?,
    })
}

/// `utime + stime` from the text of `/proc/<pid>/stat` (fields 14 and 15; the command name,
/// field 2, is in parentheses and may hold spaces, so fields are counted after its `)`).
pub fn cpu_time(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

/// A `kB` value from the text of `/proc/<pid>/status`, e.g. `VmHWM:    12345 kB`.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_adds_user_and_system_ticks() {
        let cases = [
            (
                "4242 (workflow-operator) S 1 4242 4242 0 -1 4194560 1209 0 0 0 150 25 0 0 20 0 9 0",
                Some(Duration::from_millis(1750)),
            ),
            // A command name with spaces and a parenthesis.
            (
                "7 (a b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0",
                Some(Duration::from_millis(70)),
            ),
            ("garbage", None),
            ("1 (x) S 1 2", None),
        ];
        for (stat, want) in cases {
            assert_eq!(cpu_time(stat), want, "{stat}");
        }
    }

    #[test]
    fn status_values_are_read_by_exact_key() {
        let status = "Name:\tx\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nVmRSSx:\t 1 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(51200));
        assert_eq!(status_kib(status, "VmRSS"), Some(40960));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = sample("self").unwrap();
        assert!(sample.peak_rss_kib >= sample.rss_kib && sample.rss_kib > 0);
        assert!(sample.peak_rss_mib() > 0.0);
    }
}
