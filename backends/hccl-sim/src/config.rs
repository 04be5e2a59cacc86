//! Environment of the simulator, read once: timeouts, staging buffer sizes, fault injection.
//!
//! | Variable | Meaning | Default |
//! | --- | --- | --- |
//! | `HCCL_CONNECT_TIMEOUT` | seconds `HcclCommInitRootInfo` waits for every rank (HCCL's variable) | 120 |
//! | `HCCL_EXEC_TIMEOUT` | seconds an operation waits for its peers (HCCL's variable) | 1836 |
//! | `XSIM_HCCL_TIMEOUT_MS` | simulator-only: overrides both, in milliseconds | unset |
//! | `XSIM_HCCL_BUFFER_BYTES` | simulator-only: staging slot per rank (collectives are chunked to it; at least 512) | 1 MiB |
//! | `XSIM_HCCL_FAULTS` | simulator-only: fault rules, see below | none |
//! | `XSIM_HCCL_FAULT_STREAM` | simulator-only: `1` makes a failed operation fault its stream (507904) like a device task exception | unset: the stream goes on |
//! | `XSIM_ACL_LIBRARY` | simulator-only: the ACL simulator whose streams run the operations; else `XSTREAM_ACL_LIBRARY`, else `libascendcl.so` | |
//!
//! Fault rules (`XSIM_HCCL_FAULTS`, `,`-separated), `N` counting the operations a rank has
//! started on its streams from 0:
//! * `die:RANK@N` — the process holding rank `RANK` exits (`_exit(86)`) when that rank starts
//!   its operation `N` (a rank that dies);
//! * `stall:RANK@N` — rank `RANK` never arrives at its operation `N`: it waits like a hung
//!   device until its peers time out (or the stream is aborted / the communicator destroyed).

use std::sync::OnceLock;
use std::time::Duration;

/// A fault rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The process exits.
    Die,
    /// The rank never arrives.
    Stall,
}

/// The environment, read once.
pub(crate) struct Config {
    pub(crate) connect_timeout: Duration,
    pub(crate) exec_timeout: Duration,
    pub(crate) slot_bytes: usize,
    pub(crate) faults: Vec<(Fault, u32, u64)>,
    pub(crate) fault_stream: bool,
}

fn secs(var: &str, default: u64) -> Duration {
    let s = std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(default);
    Duration::from_secs(s)
}

fn parse_faults(spec: &str) -> Vec<(Fault, u32, u64)> {
    spec.split(',')
        .filter_map(|rule| {
            let (kind, rest) = rule.trim().split_once(':')?;
            let (rank, n) = rest.split_once('@')?;
            let kind = match kind {
                "die" => Fault::Die,
                "stall" => Fault::Stall,
                _ => return None,
            };
            Some((kind, rank.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

/// The process-wide configuration.
pub(crate) fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| {
        let ms = std::env::var("XSIM_HCCL_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis);
        let slot = std::env::var("XSIM_HCCL_BUFFER_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1 << 20)
            // Room for one element of the widest type from each of the most ranks (a
            // reduce-scatter chunk holds one element per rank).
            .max(16 * crate::shm::MAX_RANKS as usize);
        Config {
            connect_timeout: ms.unwrap_or_else(|| secs("HCCL_CONNECT_TIMEOUT", 120)),
            exec_timeout: ms.unwrap_or_else(|| secs("HCCL_EXEC_TIMEOUT", 1836)),
            // 16-byte multiple: every element size divides it.
            slot_bytes: slot & !15,
            faults: std::env::var("XSIM_HCCL_FAULTS")
                .map(|s| parse_faults(&s))
                .unwrap_or_default(),
            fault_stream: std::env::var("XSIM_HCCL_FAULT_STREAM").is_ok_and(|v| v.trim() == "1"),
        }
    })
}

/// The fault that applies to operation `n` of rank `rank`, if any.
pub(crate) fn fault(rank: u32, n: u64) -> Option<Fault> {
    config()
        .faults
        .iter()
        .find(|&&(_, r, k)| r == rank && k == n)
        .map(|&(f, _, _)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_rules_parse_and_skip_malformed_entries() {
        let f = parse_faults("die:1@3, stall:0@0,bogus,die:x@1,kill:1@1");
        assert_eq!(f, vec![(Fault::Die, 1, 3), (Fault::Stall, 0, 0)]);
    }
}
