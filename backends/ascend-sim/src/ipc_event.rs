//! IPC event handles: `aclrtIpcGetEventHandle` / `aclrtIpcOpenEventHandle` (prototypes:
//! `include/external/acl/acl_rt.h`; checks: `src/acl/aclrt_impl/event.cpp`,
//! `src/runtime/api/api_c_standard_soc.cc`, `src/runtime/api/impl/api_impl_event.cc`).
//!
//! Order of checks, as the runtime: the ACL layer's NULL checks (`ACL_ERROR_INVALID_PARAM`,
//! 100000: the handle, then the event, for the get call; the event out-pointer for the open
//! call); then the chip's `RT_FEATURE_IPC_EVENT`: without it (`XSIM_IPC=0`, and the 910 and
//! 310P products always) `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000) before
//! the event or the handle bytes are looked at; then an unknown event or one not created with
//! `ACL_EVENT_IPC` → 107000.
//!
//! On A2/A3 with IPC on (the default) an exported event's state lives in a shared page (see
//! `ipc_shm`): each record in any process takes the next number of a shared counter,
//! and a completion raises the shared "done" mark to its number. A query, synchronize or
//! stream wait in any process refers to the latest record made by any process at the time of
//! the call; records on different streams completing out of order are folded into the
//! highest completed number (a later record completing first releases waiters of an earlier
//! one). The handle bytes name the exporting process, the page and a nonce; a handle of an
//! exporter that exited, or garbage, opens with 107000 (the driver's refusal, whose exact code
//! the public source does not show). A wait whose record belongs to a process that exited
//! without completing it ends instead of hanging.

use crate::codes::*;
use crate::error::*;
use crate::event::*;
use crate::ipc_shm::*;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicI32, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// `ACL_IPC_EVENT_HANDLE_SIZE`.
pub const ACL_IPC_EVENT_HANDLE_SIZE: usize = 64;

/// C `aclrtIpcEventHandle`: `{ char reserved[ACL_IPC_EVENT_HANDLE_SIZE]; }`, passed by value
/// to `aclrtIpcOpenEventHandle`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AclrtIpcEventHandle {
    /// The opaque bytes.
    pub reserved: [c_char; ACL_IPC_EVENT_HANDLE_SIZE],
}

const NO_IPC: &str = "the simulated chip has no IPC events (an A2/A3 with IPC on has them)";
const MAGIC: u64 = u64::from_le_bytes(*b"XSIMIPCE");

#[repr(C)]
struct Page {
    magic: AtomicU64,
    nonce: AtomicU64,
    latest: AtomicU64,
    done: AtomicU64,
    last_pid: AtomicI32,
}

/// The shared state of an exported or opened event in this process.
pub(crate) struct Shared {
    shm: Shm,
    /// Pid and descriptor number that name the page (the exporter's).
    owner: (i32, i32),
    /// Local record generation → shared record number.
    gens: Mutex<HashMap<u64, u64>>,
    /// Whether this process exported it (its destruction withdraws the handle).
    exporter: bool,
}

impl Shared {
    fn page(&self) -> &Page {
        // SAFETY: the mapping is at least one page and only accessed through atomics.
        unsafe { &*(self.shm.base as *const Page) }
    }
    fn done_at(&self, target: u64) -> bool {
        self.page().done.load(SeqCst) >= target
    }
}

fn shared_map() -> &'static Mutex<HashMap<usize, Arc<Shared>>> {
    static M: OnceLock<Mutex<HashMap<usize, Arc<Shared>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

fn shared_of(e: &Event) -> Option<Arc<Shared>> {
    if e.flags != ACL_EVENT_IPC {
        return None;
    }
    lock(shared_map())
        .get(&(e as *const Event as usize))
        .cloned()
}

/// A record of `e` got local generation `gen` (called with the event's state locked).
pub(crate) fn on_record(e: &Event, gen: u64) {
    if let Some(s) = shared_of(e) {
        let n = s.page().latest.fetch_add(1, SeqCst) + 1;
        s.page().last_pid.store(my_pid(), SeqCst);
        lock(&s.gens).insert(gen, n);
    }
}

/// The record of local generation `gen` of `e` completed.
pub(crate) fn on_complete(e: &Event, gen: u64) {
    if let Some(s) = shared_of(e) {
        if let Some(n) = lock(&s.gens).remove(&gen) {
            s.page().done.fetch_max(n, SeqCst);
        }
    }
}

/// `Some(whether the latest record by any process completed)` for a shared event.
pub(crate) fn shared_complete(e: &Event) -> Option<bool> {
    let s = shared_of(e)?;
    Some(s.done_at(s.page().latest.load(SeqCst)))
}

/// The wait target of a shared event (its latest shared record number).
pub(crate) fn wait_target(e: &Event) -> Option<u64> {
    shared_of(e).map(|s| s.page().latest.load(SeqCst))
}

/// Blocks until the shared record `target` of `e` completed, `stop()` says so, or the process
/// that made the latest record exited without completing it. `false` when `e` is not shared.
pub(crate) fn wait_shared(e: &Event, target: u64, stop: &dyn Fn() -> bool) -> bool {
    let Some(s) = shared_of(e) else {
        return false;
    };
    while !s.done_at(target) {
        if stop() || !alive(s.page().last_pid.load(SeqCst)) {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    true
}

/// `aclrtSynchronizeEvent` on a shared event: `None` when `e` is not shared.
pub(crate) fn sync_shared(e: &Event, dl: Option<Instant>) -> Option<R> {
    let s = shared_of(e)?;
    let target = s.page().latest.load(SeqCst);
    Some(loop {
        if s.done_at(target) {
            break e.ctx.check_poison();
        }
        if let Err(x) = e.ctx.check_poison() {
            break Err(x);
        }
        if !alive(s.page().last_pid.load(SeqCst)) {
            break err(
                ACL_ERROR_RT_DRV_INTERNAL_ERROR,
                "the process that recorded the IPC event exited before the record completed",
            );
        }
        if dl.is_some_and(|d| Instant::now() >= d) {
            break err(
                ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                "event synchronize timed out",
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    })
}

/// The event `h` was destroyed.
pub(crate) fn forget(h: usize) {
    if let Some(s) = lock(shared_map()).remove(&h) {
        if s.exporter {
            s.page().magic.store(0, SeqCst);
        }
    }
}

fn encode(s: &Shared) -> AclrtIpcEventHandle {
    let mut b = [0u8; ACL_IPC_EVENT_HANDLE_SIZE];
    b[..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&s.owner.0.to_le_bytes());
    b[12..16].copy_from_slice(&s.owner.1.to_le_bytes());
    b[16..24].copy_from_slice(&s.page().nonce.load(SeqCst).to_le_bytes());
    AclrtIpcEventHandle {
        reserved: b.map(|x| x as c_char),
    }
}

/// `aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle* handle)`.
///
/// # Safety
/// `handle` NULL or valid for a write; `event` is only used as a lookup key.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: *mut c_void,
    handle: *mut AclrtIpcEventHandle,
) -> i32 {
    ffi("aclrtIpcGetEventHandle", true, || {
        non_null(handle, "handle")?;
        non_null(event, "event")?;
        if !ipc_events_supported() {
            return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, NO_IPC);
        }
        let e = crate::registry::event_of(event).map_err(|_| AclErr {
            code: ACL_ERROR_RT_PARAM_INVALID,
            msg: "not an event".into(),
        })?;
        if e.flags != ACL_EVENT_IPC {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("event flag {:#x}: only IPC events are supported", e.flags),
            );
        }
        // The event's state first: a record locks the event, then the map.
        let (was_done, gen) = {
            let st = lock(&e.st);
            (st.latest_done(), st.record_gen)
        };
        let s = {
            let mut m = lock(shared_map());
            match m.get(&(event as usize)) {
                Some(s) => s.clone(),
                None => {
                    let shm = Shm::create(PAGE)?;
                    let owner = (my_pid(), shm.fd);
                    let s = Arc::new(Shared {
                        shm,
                        owner,
                        gens: Mutex::new(HashMap::new()),
                        exporter: true,
                    });
                    let p = s.page();
                    p.magic.store(MAGIC, SeqCst);
                    p.nonce.store(nonce(), SeqCst);
                    // Records made before the export count as one: done when they are.
                    p.latest.store(1, SeqCst);
                    p.done.store(u64::from(was_done), SeqCst);
                    p.last_pid.store(my_pid(), SeqCst);
                    if !was_done {
                        lock(&s.gens).insert(gen, 1);
                    }
                    m.insert(event as usize, s.clone());
                    s
                }
            }
        };
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(handle, encode(&s)) }
    })
}

/// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent* event)`.
///
/// # Safety
/// `event` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: AclrtIpcEventHandle,
    event: *mut *mut c_void,
) -> i32 {
    ffi("aclrtIpcOpenEventHandle", true, || {
        non_null(event, "event")?;
        if !ipc_events_supported() {
            return err(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, NO_IPC);
        }
        let ctx = crate::device::cur_ctx()?;
        let b = handle.reserved.map(|x| x as u8);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let i32_at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let refuse = |why: &str| {
            err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("IPC event handle: {why}"),
            )
        };
        if u64_at(0) != MAGIC || b[24..].iter().any(|&x| x != 0) {
            return refuse("not a handle of this runtime");
        }
        let (pid, fd, n) = (i32_at(8), i32_at(12), u64_at(16));
        let Some(shm) = Shm::open(pid, fd, PAGE) else {
            return refuse("the exporting process or its event is gone");
        };
        let s = Arc::new(Shared {
            shm,
            owner: (pid, fd),
            gens: Mutex::new(HashMap::new()),
            exporter: false,
        });
        if s.page().magic.load(SeqCst) != MAGIC || s.page().nonce.load(SeqCst) != n {
            return refuse("the exporting event is gone");
        }
        let e = new_event(&ctx, ACL_EVENT_IPC, EvKind::Ex)?;
        let h = Arc::as_ptr(&e) as usize;
        lock(shared_map()).insert(h, s);
        // SAFETY: checked non-NULL; caller contract.
        unsafe { put(event, h as *mut c_void) }
    })
}
