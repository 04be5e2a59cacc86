//! Launchers: where a process finds its rank, the job's size, its index on the host, rank 0's
//! rendezvous endpoint and the job's identity, from the variables the common launchers set.
//!
//! # Sources, in this order
//! | launcher | rank | world size | local rank | job token |
//! |---|---|---|---|---|
//! | torchrun ([`Launcher::Torchrun`]) | `RANK` | `WORLD_SIZE` | `LOCAL_RANK` (default: the rank) | `TORCHELASTIC_RUN_ID` |
//! | Slurm `srun` ([`Launcher::Slurm`]) | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_LOCALID` | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//! | Open MPI `mpirun` ([`Launcher::OpenMpi`]) | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` | `OMPI_COMM_WORLD_LOCAL_RANK` | `OMPI_MCA_ess_base_jobid`, else `PMIX_NAMESPACE` |
//! | MPICH / Hydra `mpiexec` ([`Launcher::Hydra`]) | `PMI_RANK` | `PMI_SIZE` | `MPI_LOCALRANKID` | `PMI_JOBID` when set |
//! | PMI ([`Launcher::Pmi`]) | `PMI_RANK` | `PMI_SIZE` | `PMI_LOCAL_RANK` (default: the rank) | `PMI_JOBID` when set |
//!
//! A launcher counts only when all its variables are set (torchrun's and PMI's local rank may
//! be missing; torchrun's `RANK` without `WORLD_SIZE`, or the reverse, is an error as before).
//! Hydra and PMI share `PMI_RANK`/`PMI_SIZE`: Hydra is reported when `MPI_LOCALRANKID` is set,
//! PMI otherwise. The first launcher found in the table's order gives the placement. When
//! another launcher is found too and says another rank or world size, it is an error naming
//! both, except under torchrun started inside another launcher (`TORCHELASTIC_RUN_ID` set,
//! e.g. `srun ... torchrun ...`): the outer launcher placed torchrun's agent, torchrun placed
//! this process, so torchrun's variables win. `XSTREAM_LAUNCHER` (one of the
//! [`Launcher::name`]s, or `none`) picks one launcher and ignores the others; `none` means
//! "not launched as a job".
//!
//! `XSTREAM_JOB_ID`, when set, is the job token whatever the launcher.
//!
//! # Rank 0's endpoint
//! - torchrun: `MASTER_ADDR` / `MASTER_PORT` ([`Endpoint::from_lookup`]).
//! - Slurm: host `XSTREAM_MASTER_ADDR`, else `MASTER_ADDR`, else the first host of
//!   `SLURM_JOB_NODELIST` (else `SLURM_NODELIST`), whose compressed syntax
//!   (`node[01-03,07],gpu5`) is expanded here ([`expand_hostlist`]); port
//!   `XSTREAM_RENDEZVOUS_PORT`, else `MASTER_PORT`, else derived from the job:
//!   `10000 + (8 * SLURM_JOB_ID + SLURM_STEP_ID) % 20000` ([`slurm_default_port`]).
//! - Open MPI, Hydra, PMI: host `XSTREAM_MASTER_ADDR`, else `MASTER_ADDR`; port
//!   `XSTREAM_RENDEZVOUS_PORT`, else `MASTER_PORT`. Both are required (an MPI launcher names
//!   no rank-0 host xstream could trust): a missing one is an error naming the variables.

use super::rendezvous::{Endpoint, MASTER_ADDR_ENV, MASTER_PORT_ENV, RENDEZVOUS_PORT_ENV};
use crate::{Error, Result};

/// The variable that picks one launcher (a [`Launcher::name`]) or `none`.
pub const LAUNCHER_ENV: &str = "XSTREAM_LAUNCHER";
/// The variable holding an explicit job token (wins over the launcher's).
pub const JOB_ID_ENV: &str = "XSTREAM_JOB_ID";
/// The variable holding rank 0's host for Slurm and the MPI launchers (wins over
/// `MASTER_ADDR`).
pub const MASTER_ADDR_OVERRIDE_ENV: &str = "XSTREAM_MASTER_ADDR";
/// torchrun's run id (its `--rdzv-id`), the torchrun job token.
pub const TORCHRUN_RUN_ID_ENV: &str = "TORCHELASTIC_RUN_ID";
/// The longest job token the hello carries, in bytes.
pub const MAX_JOB_TOKEN_LEN: usize = 255;
/// The most host names [`expand_hostlist`] produces.
pub const MAX_HOSTS: usize = 1 << 20;

/// A launcher xstream reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Launcher {
    /// torchrun (and other launchers that set `RANK` / `WORLD_SIZE`).
    Torchrun,
    /// Slurm's `srun`.
    Slurm,
    /// Open MPI's `mpirun` / `mpiexec`.
    OpenMpi,
    /// MPICH's (and Intel MPI's) Hydra `mpiexec`.
    Hydra,
    /// A PMI launcher that sets only `PMI_RANK` / `PMI_SIZE`.
    Pmi,
}

impl Launcher {
    /// Every launcher, in detection order.
    pub const ORDER: [Launcher; 5] = [
        Launcher::Torchrun,
        Launcher::Slurm,
        Launcher::OpenMpi,
        Launcher::Hydra,
        Launcher::Pmi,
    ];

    /// The name `XSTREAM_LAUNCHER` takes and messages use.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Slurm => "slurm",
            Launcher::OpenMpi => "openmpi",
            Launcher::Hydra => "hydra",
            Launcher::Pmi => "pmi",
        }
    }

    /// The variables holding (rank, world size, local rank).
    pub fn variables(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Launcher::Torchrun => ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
            Launcher::Slurm => ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
            Launcher::OpenMpi => (
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ),
            Launcher::Hydra => ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            Launcher::Pmi => ("PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK"),
        }
    }

    /// Whether the local rank may be missing (it then defaults to the rank).
    fn local_rank_optional(self) -> bool {
        matches!(self, Launcher::Torchrun | Launcher::Pmi)
    }

    fn from_name(s: &str) -> Option<Self> {
        Self::ORDER.into_iter().find(|l| l.name() == s)
    }
}

impl std::fmt::Display for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A process's place in a job as a launcher gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The launcher whose variables gave it.
    pub launcher: Launcher,
    /// This process's rank.
    pub rank: usize,
    /// The job's size.
    pub world_size: usize,
    /// This process's index on its host.
    pub local_rank: usize,
    /// Whether the local rank defaulted to the rank (its variable was not set).
    pub local_rank_defaulted: bool,
    /// Other launchers whose variables were set too and agreed (or, under a nested
    /// torchrun, were overridden).
    pub also: Vec<Launcher>,
}

fn number(get: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    get(name)
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| Error::invalid(format!("{name}={v:?} is not a non-negative integer")))
        })
        .transpose()
}

/// Reads one launcher's variables: `Ok(None)` when they are not all set.
fn read_one(
    launcher: Launcher,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Option<Placement>> {
    let (rv, wv, lv) = launcher.variables();
    let (rank, world_size) = match (number(get, rv)?, number(get, wv)?) {
        (Some(r), Some(w)) => (r, w),
        (None, None) => return Ok(None),
        (r, _) if launcher == Launcher::Torchrun => {
            let (set, unset) = if r.is_some() { (rv, wv) } else { (wv, rv) };
            return Err(Error::invalid(format!(
                "{set} is set but {unset} is not: set both (as torchrun does)"
            )));
        }
        _ => return Ok(None),
    };
    let local = number(get, lv)?;
    if local.is_none() && !launcher.local_rank_optional() {
        return Ok(None);
    }
    if world_size == 0 || rank >= world_size {
        return Err(Error::invalid(format!(
            "{rv}={rank} is not a rank of {wv}={world_size} ({launcher})"
        )));
    }
    Ok(Some(Placement {
        launcher,
        rank,
        world_size,
        local_rank: local.unwrap_or(rank),
        local_rank_defaulted: local.is_none(),
        also: Vec::new(),
    }))
}

fn describe(p: &Placement) -> String {
    let (rv, wv, _) = p.launcher.variables();
    format!("{} ({rv}={}, {wv}={})", p.launcher, p.rank, p.world_size)
}

/// Finds this process's placement through `get` (see the module documentation for the order);
/// `Ok(None)` when no launcher's variables are set or `XSTREAM_LAUNCHER=none`.
///
/// # Errors
/// [`Error::InvalidArgument`]: a value that is not a number, a rank not below its world size,
/// torchrun's `RANK` without `WORLD_SIZE` (or the reverse), two launchers that disagree on
/// the rank or world size (naming both), an unknown `XSTREAM_LAUNCHER`, or an
/// `XSTREAM_LAUNCHER` whose variables are not all set.
pub fn detect(get: impl Fn(&str) -> Option<String>) -> Result<Option<Placement>> {
    if let Some(forced) = get(LAUNCHER_ENV) {
        let forced = forced.trim().to_ascii_lowercase();
        if forced == "none" {
            return Ok(None);
        }
        let l = Launcher::from_name(&forced).ok_or_else(|| {
            Error::invalid(format!(
                "{LAUNCHER_ENV}={forced:?} is not one of torchrun, slurm, openmpi, hydra, pmi, none"
            ))
        })?;
        return match read_one(l, &get)? {
            Some(p) => Ok(Some(p)),
            None => {
                let (rv, wv, lv) = l.variables();
                Err(Error::invalid(format!(
                    "{LAUNCHER_ENV}={l} but {rv}, {wv}{} are not all set",
                    if l.local_rank_optional() {
                        String::new()
                    } else {
                        format!(", {lv}")
                    }
                )))
            }
        };
    }
    let mut found: Vec<Placement> = Vec::new();
    for l in Launcher::ORDER {
        // Hydra and PMI share PMI_RANK/PMI_SIZE: one of them, not both.
        if l == Launcher::Pmi && found.iter().any(|p| p.launcher == Launcher::Hydra) {
            continue;
        }
        if let Some(p) = read_one(l, &get)? {
            found.push(p);
        }
    }
    let mut it = found.into_iter();
    let Some(mut first) = it.next() else {
        return Ok(None);
    };
    let nested_torchrun =
        first.launcher == Launcher::Torchrun && get(TORCHRUN_RUN_ID_ENV).is_some();
    for other in it {
        if (other.rank, other.world_size) != (first.rank, first.world_size) && !nested_torchrun {
            return Err(Error::invalid(format!(
                "launchers disagree: {} and {}: set {LAUNCHER_ENV} to the launcher that started this process (torchrun, slurm, openmpi, hydra, pmi), or unset the other's variables",
                describe(&first),
                describe(&other)
            )));
        }
        first.also.push(other.launcher);
    }
    Ok(Some(first))
}

/// The job token for `launcher` and where it came from: `XSTREAM_JOB_ID`, else the launcher's
/// own (see the module documentation); `Ok(None)` when none is set.
///
/// # Errors
/// [`Error::InvalidArgument`] for a token longer than [`MAX_JOB_TOKEN_LEN`] bytes.
pub fn job_token(
    launcher: Launcher,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<(String, String)>> {
    let nonempty = |k: &str| {
        get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let found = if let Some(v) = nonempty(JOB_ID_ENV) {
        Some((v, JOB_ID_ENV.to_string()))
    } else {
        match launcher {
            Launcher::Torchrun => {
                nonempty(TORCHRUN_RUN_ID_ENV).map(|v| (v, TORCHRUN_RUN_ID_ENV.into()))
            }
            Launcher::Slurm => nonempty("SLURM_JOB_ID").map(|job| {
                match nonempty("SLURM_STEP_ID").or_else(|| nonempty("SLURM_STEPID")) {
                    Some(step) => (format!("{job}.{step}"), "SLURM_JOB_ID.SLURM_STEP_ID".into()),
                    None => (job, "SLURM_JOB_ID".into()),
                }
            }),
            Launcher::OpenMpi => nonempty("OMPI_MCA_ess_base_jobid")
                .map(|v| (v, "OMPI_MCA_ess_base_jobid".into()))
                .or_else(|| nonempty("PMIX_NAMESPACE").map(|v| (v, "PMIX_NAMESPACE".into()))),
            Launcher::Hydra | Launcher::Pmi => {
                nonempty("PMI_JOBID").map(|v| (v, "PMI_JOBID".into()))
            }
        }
    };
    if let Some((v, from)) = &found {
        if v.len() > MAX_JOB_TOKEN_LEN {
            return Err(Error::invalid(format!(
                "the job token from {from} is {} bytes long (at most {MAX_JOB_TOKEN_LEN})",
                v.len()
            )));
        }
    }
    Ok(found)
}

/// The rendezvous port a Slurm job uses when none is set:
/// `10000 + (8 * job + step) % 20000` (below Linux's ephemeral range).
pub fn slurm_default_port(job: u64, step: u64) -> u16 {
    let span = job.wrapping_mul(8).wrapping_add(step) % 20_000;
    10_000 + span as u16
}

fn port_value(name: &str, v: &str) -> Result<u16> {
    match v.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(Error::invalid(format!(
            "{name}={v:?} is not a TCP port (1..=65535)"
        ))),
    }
}

/// Rank 0's endpoint for `launcher` and where its host and port came from (see the module
/// documentation); `Ok(None)` only for torchrun without `MASTER_ADDR`/`MASTER_PORT`.
///
/// # Errors
/// [`Error::InvalidArgument`]: as [`Endpoint::from_lookup`] for torchrun; for Slurm, no host
/// variable and no node list, a malformed node list, no port variable and no numeric
/// `SLURM_JOB_ID`; for the MPI launchers, a missing host or port variable; a port outside
/// `1..=65535`.
pub fn endpoint(
    launcher: Launcher,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<(Endpoint, String)>> {
    if launcher == Launcher::Torchrun {
        return Ok(Endpoint::from_lookup(&get)?.map(|ep| {
            (
                ep,
                format!(
                    "host: {MASTER_ADDR_ENV}; port: {RENDEZVOUS_PORT_ENV} or {MASTER_PORT_ENV}"
                ),
            )
        }));
    }
    let nonempty = |k: &str| {
        get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let addr = nonempty(MASTER_ADDR_OVERRIDE_ENV)
        .map(|h| (h, MASTER_ADDR_OVERRIDE_ENV.to_string()))
        .or_else(|| nonempty(MASTER_ADDR_ENV).map(|h| (h, MASTER_ADDR_ENV.to_string())));
    let port = [RENDEZVOUS_PORT_ENV, MASTER_PORT_ENV]
        .into_iter()
        .find_map(|k| get(k).map(|v| port_value(k, &v).map(|p| (p, k.to_string()))))
        .transpose()?;
    let (host, host_from, port, port_from) = if launcher == Launcher::Slurm {
        let (host, host_from) = match addr {
            Some(a) => a,
            None => {
                let (list, var) = ["SLURM_JOB_NODELIST", "SLURM_NODELIST"]
                    .into_iter()
                    .find_map(|k| nonempty(k).map(|v| (v, k)))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "slurm: no rank-0 host: set {MASTER_ADDR_OVERRIDE_ENV} or {MASTER_ADDR_ENV}, or run under srun (SLURM_JOB_NODELIST)"
                        ))
                    })?;
                let hosts = expand_hostlist(&list)
                    .map_err(|e| Error::invalid(format!("{var}={list:?}: {e}")))?;
                (
                    hosts[0].clone(),
                    format!("first host of {var} ({} hosts)", hosts.len()),
                )
            }
        };
        let (port, port_from) = match port {
            Some(p) => p,
            None => {
                let job = nonempty("SLURM_JOB_ID").ok_or_else(|| {
                    Error::invalid(format!(
                        "slurm: no rendezvous port: set {RENDEZVOUS_PORT_ENV} or {MASTER_PORT_ENV}, or run under srun (SLURM_JOB_ID)"
                    ))
                })?;
                let job_n = job.parse::<u64>().map_err(|_| {
                    Error::invalid(format!(
                        "SLURM_JOB_ID={job:?} is not a number: set {RENDEZVOUS_PORT_ENV}"
                    ))
                })?;
                let step = nonempty("SLURM_STEP_ID")
                    .or_else(|| nonempty("SLURM_STEPID"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0);
                (
                    slurm_default_port(job_n, step),
                    format!("derived from SLURM_JOB_ID={job_n}, SLURM_STEP_ID={step}"),
                )
            }
        };
        (host, host_from, port, port_from)
    } else {
        let need = |what: &str, vars: String| {
            Error::invalid(format!(
                "{launcher}: the launcher names no rank-0 {what}: set {vars} (the same on every rank)"
            ))
        };
        let (host, host_from) = addr.ok_or_else(|| {
            need(
                "host",
                format!("{MASTER_ADDR_OVERRIDE_ENV} or {MASTER_ADDR_ENV}"),
            )
        })?;
        let (port, port_from) = port.ok_or_else(|| {
            need(
                "port",
                format!("{RENDEZVOUS_PORT_ENV} or {MASTER_PORT_ENV}"),
            )
        })?;
        (host, host_from, port, port_from)
    };
    Ok(Some((
        Endpoint { host, port },
        format!("host: {host_from}; port: {port_from}"),
    )))
}

/// Expands a Slurm host list: comma-separated items, each a name with bracketed groups of
/// numbers and ranges (`node[01-03,07]`, zero padding kept from the range's start;
/// `rack[1-2]-n[1-2]` expands every combination), e.g. `node[01-02],gpu5` → `node01`,
/// `node02`, `gpu5`.
///
/// # Errors
/// A message for an empty list or item, unbalanced or nested brackets, a group that is not
/// numbers and ranges, a range whose end is below its start, or more than [`MAX_HOSTS`] hosts.
pub fn expand_hostlist(list: &str) -> std::result::Result<Vec<String>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err(format!("nested '[' at byte {i}")),
            ']' if depth == 1 => depth = 0,
            ']' => return Err(format!("']' without '[' at byte {i}")),
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '[' is not closed".into());
    }
    items.push(&list[start..]);
    let mut hosts = Vec::new();
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            return Err("an empty host name".into());
        }
        let mut names = vec![String::new()];
        let mut rest = item;
        while let Some(open) = rest.find('[') {
            let close = open + rest[open..].find(']').ok_or("a '[' is not closed")?;
            let choices = expand_group(&rest[open + 1..close])?;
            let prefix = &rest[..open];
            if names.len().saturating_mul(choices.len()) > MAX_HOSTS {
                return Err(format!("more than {MAX_HOSTS} hosts"));
            }
            names = names
                .iter()
                .flat_map(|n| choices.iter().map(move |c| format!("{n}{prefix}{c}")))
                .collect();
            rest = &rest[close + 1..];
        }
        hosts.extend(names.into_iter().map(|n| n + rest));
        if hosts.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
    }
    Ok(hosts)
}

/// One bracket group's contents: `01-03,07` → `01`, `02`, `03`, `07`.
fn expand_group(group: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in group.split(',') {
        let part = part.trim();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        if !digits(a) || !digits(b) {
            return Err(format!("[{group}]: {part:?} is not a number or a range"));
        }
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("[{group}]: {s} is too large"))
        };
        let (lo, hi) = (parse(a)?, parse(b)?);
        if hi < lo {
            return Err(format!("[{group}]: the range {part} ends below its start"));
        }
        if hi - lo >= MAX_HOSTS as u64 || out.len() + (hi - lo) as usize >= MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
        let width = a.len();
        out.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
