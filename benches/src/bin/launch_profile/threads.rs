//! Every thread's CPU time and context switches (`/proc/self/task/*`), read before and after
//! each batch outside its time: what the other threads (the driver's callback thread,
//! xstream's poller) spent per operation, and how often each one slept.

use std::collections::BTreeMap;

/// One thread's counters at one moment.
#[derive(Clone, Copy, Default)]
struct Counters {
    /// Nanoseconds on a CPU (`schedstat`'s first field).
    run_ns: u64,
    /// Voluntary context switches (sleeps: futex waits, blocking reads).
    vcsw: u64,
}

/// The counters of every thread of this process, by thread id (and its name).
pub struct Snapshot(BTreeMap<i32, (String, Counters)>);

impl Snapshot {
    /// Reads every thread now (an empty snapshot where `/proc` is unreadable). `SIGPROF` is
    /// blocked on this thread meanwhile: the sampler's 50 µs timer would otherwise restart
    /// each `/proc` read that takes longer than its period, for ever.
    pub fn now() -> Snapshot {
        let _blocked = BlockProf::new();
        Snapshot::read()
    }

    fn read() -> Snapshot {
        let mut m = BTreeMap::new();
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return Snapshot(m);
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let p = e.path();
            let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            let run_ns = std::fs::read_to_string(p.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
                .unwrap_or(0);
            let vcsw = std::fs::read_to_string(p.join("status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                        .and_then(|v| v.trim().parse().ok())
                })
                .unwrap_or(0);
            m.insert(tid, (comm.trim().to_string(), Counters { run_ns, vcsw }));
        }
        Snapshot(m)
    }
}

/// Per thread name: CPU ns and voluntary switches summed over batches.
#[derive(Default)]
pub struct Totals(BTreeMap<String, (u64, u64)>);

impl Totals {
    /// Adds what each thread did between `a` and `b` (a thread that started in between counts
    /// from zero; `main` is this thread's id, named "enqueuing thread").
    pub fn add(&mut self, a: &Snapshot, b: &Snapshot, main: i32) {
        for (tid, (comm, c)) in &b.0 {
            let before = a.0.get(tid).map(|x| x.1).unwrap_or_default();
            let run = c.run_ns.saturating_sub(before.run_ns);
            let vcsw = c.vcsw.saturating_sub(before.vcsw);
            if run == 0 && vcsw == 0 {
                continue;
            }
            let name = if *tid == main {
                "enqueuing thread".to_string()
            } else {
                comm.clone()
            };
            let t = self.0.entry(name).or_default();
            t.0 += run;
            t.1 += vcsw;
        }
    }

    /// "name: cpu ns/op, sleeps/1000 ops; ..." for threads above 1 ns per operation.
    pub fn describe(&self, ops: u64) -> String {
        let mut parts = Vec::new();
        for (name, (run, vcsw)) in &self.0 {
            let per = *run as f64 / ops as f64;
            if per < 1.0 && *vcsw == 0 {
                continue;
            }
            parts.push(format!(
                "{name}: {per:.0} ns, {:.0} sleeps/1000",
                *vcsw as f64 * 1000.0 / ops as f64
            ));
        }
        parts.join("; ")
    }
}

/// `SIGPROF` blocked on the calling thread while this lives (delivered at the drop): a sleep
/// or a `/proc` read longer than the sampling period would otherwise restart for ever.
pub(crate) struct BlockProf(libc::sigset_t);

impl BlockProf {
    pub(crate) fn new() -> BlockProf {
        // SAFETY: both sets are plain values initialised by sigemptyset before use; the
        // pointers are valid for the calls.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPROF);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            BlockProf(old)
        }
    }
}

impl Drop for BlockProf {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new` on the same thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}
