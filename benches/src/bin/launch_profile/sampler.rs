//! A minimal sampling profiler: a `SIGPROF` timer of wall time sent to one thread (the one that
//! started the sampler), whose handler records the interrupted instruction address under the variant currently marked, and the places those addresses fall in
//! (`/proc/self/maps`). Linux on x86_64 and aarch64 only; elsewhere [`Sampler::start`] fails.
//!
//! The handler touches only atomics and `gettid` (async-signal-safe); the buffers are static,
//! so nothing is allocated in it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicIsize, AtomicUsize, Ordering};
use std::time::Duration;

/// The sampling period (wall time of the sampled thread).
pub const PERIOD: Duration = Duration::from_micros(50);
/// Variants at most.
const VARIANTS: usize = 32;
/// Samples kept per variant (more are counted as lost).
const CAP: usize = 1 << 15;

static RUNNING: AtomicBool = AtomicBool::new(false);
static VARIANT: AtomicIsize = AtomicIsize::new(-1);
static TID: AtomicI32 = AtomicI32::new(0);
static COUNT: [AtomicUsize; VARIANTS] = [const { AtomicUsize::new(0) }; VARIANTS];
static OTHER: [AtomicUsize; VARIANTS] = [const { AtomicUsize::new(0) }; VARIANTS];
static PCS: [AtomicUsize; VARIANTS * CAP] = [const { AtomicUsize::new(0) }; VARIANTS * CAP];

pub(crate) fn gettid() -> i32 {
    // SAFETY: the gettid system call takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The interrupted instruction address in a signal handler's context.
///
/// # Safety
/// `uc` is the third argument of an `SA_SIGINFO` handler (a live `ucontext_t`).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn pc_of(uc: *mut libc::c_void) -> usize {
    // SAFETY: the caller passes the kernel's ucontext_t of this signal.
    unsafe { (*(uc as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
}

/// The interrupted instruction address in a signal handler's context.
///
/// # Safety
/// `uc` is the third argument of an `SA_SIGINFO` handler (a live `ucontext_t`).
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
unsafe fn pc_of(uc: *mut libc::c_void) -> usize {
    // SAFETY: the caller passes the kernel's ucontext_t of this signal.
    unsafe { (*(uc as *const libc::ucontext_t)).uc_mcontext.pc as usize }
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
extern "C" fn on_sigprof(_sig: libc::c_int, _info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // No panic may leave this handler (it would unwind into the interrupted code).
    let _ = std::panic::catch_unwind(|| {
        let v = VARIANT.load(Ordering::Relaxed);
        if v < 0 || v as usize >= VARIANTS {
            return;
        }
        let v = v as usize;
        if gettid() != TID.load(Ordering::Relaxed) {
            OTHER[v].fetch_add(1, Ordering::Relaxed);
            return;
        }
        // SAFETY: `uc` is this SA_SIGINFO handler's context argument.
        let pc = unsafe { pc_of(uc) };
        let n = COUNT[v].fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = PCS.get(v * CAP + n) {
            if n < CAP {
                slot.store(pc, Ordering::Relaxed);
            }
        }
    });
}

/// A running sampler (one per process at a time).
pub struct Sampler {
    variants: usize,
}

/// What a run recorded.
pub struct Samples {
    /// The launching thread's sampled addresses, per variant.
    pub per_variant: Vec<Vec<usize>>,
    /// Samples that fell on other threads while each variant ran.
    pub other_threads: Vec<usize>,
}

/// The sampling timer (a `timer_t`), 0 when none.
static TIMER: AtomicUsize = AtomicUsize::new(0);

/// Creates the timer: `CLOCK_MONOTONIC` (a high-resolution timer; the CPU-time clocks are
/// only checked at the scheduler tick, too coarse for launches of a few µs), its signal sent to
/// thread `tid` alone, so what is sampled is that thread's wall time.
fn create_timer(tid: i32) -> std::io::Result<()> {
    // SAFETY: a zeroed sigevent is a valid starting value; the fields set below select
    // SIGPROF delivered to one thread.
    let mut ev: libc::sigevent = unsafe { std::mem::zeroed() };
    ev.sigev_notify = libc::SIGEV_THREAD_ID;
    ev.sigev_signo = libc::SIGPROF;
    ev.sigev_notify_thread_id = tid;
    let mut t: libc::timer_t = std::ptr::null_mut();
    // SAFETY: valid sigevent and out-pointer.
    if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    TIMER.store(t as usize, Ordering::Relaxed);
    Ok(())
}

/// Arms the timer with `period` (zero disarms it).
fn set_timer(period: Duration) -> std::io::Result<()> {
    let ts = libc::timespec {
        tv_sec: period.as_secs() as libc::time_t,
        tv_nsec: period.subsec_nanos() as libc::c_long,
    };
    let it = libc::itimerspec {
        it_interval: ts,
        it_value: ts,
    };
    let t = TIMER.load(Ordering::Relaxed) as libc::timer_t;
    // SAFETY: `t` is the timer create_timer made (not yet deleted); `it` is valid; the old
    // value is not asked for.
    if unsafe { libc::timer_settime(t, 0, &it, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn delete_timer() {
    let t = TIMER.swap(0, Ordering::Relaxed) as libc::timer_t;
    if !t.is_null() {
        // SAFETY: `t` is the timer create_timer made, deleted once (swapped out above).
        unsafe { libc::timer_delete(t) };
    }
}

impl Sampler {
    /// Installs the handler and starts the timer; samples are kept only while a variant is
    /// marked ([`Sampler::set_variant`]) and only on the calling thread.
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    pub fn start(variants: usize) -> std::io::Result<Sampler> {
        if variants > VARIANTS {
            return Err(std::io::Error::other(format!(
                "{variants} variants, at most {VARIANTS}"
            )));
        }
        if RUNNING.swap(true, Ordering::AcqRel) {
            return Err(std::io::Error::other("a sampler is already running"));
        }
        for i in 0..VARIANTS {
            COUNT[i].store(0, Ordering::Relaxed);
            OTHER[i].store(0, Ordering::Relaxed);
        }
        VARIANT.store(-1, Ordering::Relaxed);
        TID.store(gettid(), Ordering::Relaxed);
        // SAFETY: a zeroed sigaction is a valid starting value; the fields set are the
        // handler (an SA_SIGINFO handler of the right signature) and the flags.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            on_sigprof;
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: installs a handler for SIGPROF, which nothing else in this program uses.
        if unsafe { libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()) } != 0 {
            RUNNING.store(false, Ordering::Release);
            return Err(std::io::Error::last_os_error());
        }
        if let Err(e) = create_timer(gettid()).and_then(|()| set_timer(PERIOD)) {
            delete_timer();
            RUNNING.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(Sampler { variants })
    }

    /// On other systems there is no sampler.
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    pub fn start(_variants: usize) -> std::io::Result<Sampler> {
        Err(std::io::Error::other(
            "the sampler needs Linux on x86_64 or aarch64",
        ))
    }

    /// Marks the variant that runs now (`None`: samples are dropped).
    pub fn set_variant(&self, v: Option<usize>) {
        VARIANT.store(v.map_or(-1, |v| v as isize), Ordering::Relaxed);
    }

    /// Stops the timer, ignores later signals and returns what was recorded.
    pub fn stop(self) -> Samples {
        VARIANT.store(-1, Ordering::Relaxed);
        let _ = set_timer(Duration::ZERO);
        delete_timer();
        // SAFETY: SIG_IGN for SIGPROF: a signal still pending is dropped.
        unsafe { libc::signal(libc::SIGPROF, libc::SIG_IGN) };
        let per_variant = (0..self.variants)
            .map(|v| {
                let n = COUNT[v].load(Ordering::Relaxed).min(CAP);
                (0..n)
                    .map(|k| PCS[v * CAP + k].load(Ordering::Relaxed))
                    .collect()
            })
            .collect();
        let other_threads = (0..self.variants)
            .map(|v| OTHER[v].load(Ordering::Relaxed))
            .collect();
        RUNNING.store(false, Ordering::Release);
        Samples {
            per_variant,
            other_threads,
        }
    }
}

/// The CUDA driver library (or the null driver double standing for it).
fn is_driver(path: &str) -> bool {
    path.contains("libcuda.so") || path.contains("libxstream_cuda_null")
}

/// One executable mapping of the process.
struct Mapping {
    start: usize,
    end: usize,
    path: String,
}

/// The process's executable mappings, read once after the run.
pub struct Places {
    maps: Vec<Mapping>,
    exe: String,
    exe_base: usize,
}

/// Samples per place.
pub struct Split {
    /// In this executable (xstream's code and the program).
    pub exe: usize,
    /// In the CUDA driver library.
    pub cuda: usize,
    /// Anywhere else (libc, the vDSO, other libraries, unknown).
    pub other: usize,
}

impl Places {
    /// Reads `/proc/self/maps`.
    pub fn of_this_process() -> std::io::Result<Places> {
        let exe = std::fs::read_link("/proc/self/exe")?
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string("/proc/self/maps")?;
        let mut maps = Vec::new();
        let mut exe_base = usize::MAX;
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 {
                continue;
            }
            let Some((a, b)) = f[0].split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end), Ok(off)) = (
                usize::from_str_radix(a, 16),
                usize::from_str_radix(b, 16),
                usize::from_str_radix(f[2], 16),
            ) else {
                continue;
            };
            let path = f[5..].join(" ");
            if path == exe && off == 0 {
                exe_base = exe_base.min(start);
            }
            if f[1].contains('x') {
                maps.push(Mapping { start, end, path });
            }
        }
        Ok(Places {
            maps,
            exe,
            exe_base: if exe_base == usize::MAX { 0 } else { exe_base },
        })
    }

    fn place(&self, pc: usize) -> Option<&Mapping> {
        self.maps.iter().find(|m| m.start <= pc && pc < m.end)
    }

    /// Samples in this executable, libcuda, elsewhere.
    pub fn split(&self, pcs: &[usize]) -> Split {
        let mut s = Split {
            exe: 0,
            cuda: 0,
            other: 0,
        };
        for &pc in pcs {
            match self.place(pc) {
                Some(m) if m.path == self.exe => s.exe += 1,
                Some(m) if is_driver(&m.path) => s.cuda += 1,
                _ => s.other += 1,
            }
        }
        s
    }

    /// This executable's samples by offset from its load address, most frequent first.
    pub fn exe_offsets(&self, pcs: &[usize]) -> Vec<(usize, usize)> {
        let mut h: HashMap<usize, usize> = HashMap::new();
        for &pc in pcs {
            if matches!(self.place(pc), Some(m) if m.path == self.exe) {
                *h.entry(pc - self.exe_base).or_default() += 1;
            }
        }
        let mut v: Vec<_> = h.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The executable's path.
    pub fn exe_name(&self) -> &str {
        &self.exe
    }

    /// The driver library's path, or "(not mapped)".
    pub fn cuda_name(&self) -> &str {
        self.maps
            .iter()
            .find(|m| is_driver(&m.path))
            .map_or("(not mapped)", |m| m.path.as_str())
    }
}
