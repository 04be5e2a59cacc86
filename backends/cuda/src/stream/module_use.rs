//! The modules of a stream's launches that are not yet known complete (see `crate::module`):
//! one entry per module with the sequence number of its latest launch, so that a launch
//! allocates nothing once its module is listed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{lock, CudaStream};
use crate::memory::Keep;
use crate::module::ModuleInner;

/// The modules listed ([`ModuleUses`]' list, a field of its own in `StreamState` so that the
/// marks share the state's first cache line with the keep list's).
pub(crate) type ModuleList = Mutex<Vec<(Arc<ModuleInner>, u64)>>;

/// The marks of the modules used by a stream's launches; the list ([`ModuleList`]) holds each
/// module with the sequence number of its latest launch.
#[derive(Default)]
pub(crate) struct ModuleUses {
    seq: AtomicU64,
    /// The `upto` of the latest scan: a wait that saw no newer launch skips the scan (the
    /// idle query and synchronize stay at the driver's cost while a module held elsewhere,
    /// such as the builtin one, stays listed).
    scanned: AtomicU64,
    len: AtomicUsize,
}

impl ModuleUses {
    /// The sequence number of the latest launch (a snapshot taken before a wait).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Records a launch of `m`.
    fn used(&self, list: &ModuleList, m: &Arc<ModuleInner>) {
        let mut g = lock(list);
        // Every writer holds the lock: a load and a store, no read-modify-write.
        let n = self.seq.load(Ordering::Relaxed) + 1;
        self.seq.store(n, Ordering::Release);
        match g.iter_mut().find(|(x, _)| Arc::ptr_eq(x, m)) {
            Some(e) => e.1 = n,
            None => {
                g.push((Arc::clone(m), n));
                self.len.store(g.len(), Ordering::Release);
            }
        }
    }

    /// Forgets the modules whose latest launch is at or before `upto` (known complete) and
    /// that nothing else holds (an entry whose module is still held elsewhere stays, so that
    /// the next launch of it allocates nothing). Scans once per new `upto`: an entry still
    /// held elsewhere at that scan is looked at again after the stream's next launch, or
    /// released when the stream drops.
    pub(crate) fn completed_up_to(&self, list: &ModuleList, upto: u64) {
        if self.len.load(Ordering::Acquire) == 0 || upto <= self.scanned.load(Ordering::Acquire) {
            return;
        }
        let mut done = Vec::new();
        {
            let mut g = lock(list);
            let mut i = 0;
            while i < g.len() {
                if g[i].1 <= upto && Arc::strong_count(&g[i].0) == 1 {
                    done.push(g.swap_remove(i).0);
                } else {
                    i += 1;
                }
            }
            self.len.store(g.len(), Ordering::Release);
            self.scanned.fetch_max(upto, Ordering::AcqRel);
        }
        // Unloads (a driver call) happen outside the lock.
        drop(done);
    }

    /// Takes every entry, for release behind the stream's work.
    pub(crate) fn take(&self, list: &ModuleList) -> Vec<Keep> {
        let mut g = lock(list);
        self.len.store(0, Ordering::Release);
        g.drain(..).map(|(m, _)| Keep::Module(m)).collect()
    }
}

impl CudaStream {
    /// Keeps `m` loaded until this launch is known complete (in a capture: for the graph's
    /// life).
    pub(crate) fn track_module(&self, m: &Arc<ModuleInner>) {
        if self.state.capture.is_capturing() {
            lock(&self.state.capture_keep).push(Keep::Module(Arc::clone(m)));
        } else {
            self.state.modules.used(&self.state.module_list, m);
        }
    }
}
