//! Operations: validation at the call, enqueueing as a host task of the ACL simulator's
//! stream (or into the calling thread's group), and their execution on the stream worker
//! through the world's staging slots (collectives) and byte rings (point-to-point).
//!
//! A collective is cut into chunks that fit a staging slot. Per chunk every rank copies its
//! input into its slot, passes a barrier, computes its output from all slots (fixed rank
//! order, so every rank gets bit-identical results), and passes a second barrier before the
//! slots are reused. With the first chunk each rank publishes a descriptor (kind, type, op,
//! root, count): a rank whose descriptor differs from a peer's fails the operation on every
//! rank with `HCCL_E_PARA` instead of exchanging garbage. Point-to-point messages travel
//! through the ring of their (src, dst) pair behind an 8-byte length header; a receive whose
//! size differs from the message's fails with `HCCL_E_PARA`. A failed operation records its
//! code as the communicator's asynchronous error (`HcclGetCommAsyncError`) and the world's
//! abort code (peers then stop with `HCCL_E_REMOTE`); its stream task ends and the stream goes
//! on. With `XSIM_HCCL_FAULT_STREAM=1` the task fails with `ACL_ERROR_RT_COMM_OP_RETRY_FAIL`
//! (507904) instead, which the ACL simulator turns into a device fault of the stream's context
//! (what a device reports for a failed communication task).

use crate::acl::*;
use crate::comm::*;
use crate::config::*;
use crate::reduce::*;
use crate::shm::RING_BYTES;
use crate::types::*;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

/// `ACL_ERROR_RT_COMM_OP_RETRY_FAIL`: what a failed operation's stream task reports to ACL.
pub const ACL_ERROR_RT_COMM_OP_RETRY_FAIL: i32 = 507_904;
/// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (the ACL simulator's answer on capturing streams).
const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;

/// Kinds of collectives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    AllReduce = 1,
    AllGather = 2,
    ReduceScatter = 3,
    Broadcast = 4,
    Reduce = 5,
    Barrier = 6,
}

/// A collective operation of one rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coll {
    pub(crate) kind: Kind,
    pub(crate) send: usize,
    pub(crate) recv: usize,
    pub(crate) count: u64,
    pub(crate) dtype: i32,
    pub(crate) op: i32,
    pub(crate) root: u32,
}

/// One send or receive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct P2p {
    pub(crate) send: bool,
    pub(crate) buf: usize,
    pub(crate) bytes: usize,
    pub(crate) peer: u32,
}

/// What a stream task runs.
pub(crate) enum Work {
    Coll(Coll),
    /// Sends and receives progressed together (a group, or a single one).
    P2p(Vec<P2p>),
}

struct Job {
    comm: Arc<Comm>,
    work: Work,
}

/// An operation as called, before the checks the library makes after its group branch.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// A collective.
    Coll(Coll),
    /// A send or a receive.
    P2p {
        send: bool,
        buf: usize,
        count: u64,
        dtype: i32,
        peer: u32,
    },
}

/// What a thread's open group holds.
#[derive(Default)]
struct Group {
    depth: u32,
    /// `HcclCommDestroy` calls made inside the group (run first at the outermost end).
    destroys: Vec<usize>,
    /// Operations in call order: communicator, stream, call.
    queued: Vec<(Arc<Comm>, usize, Call)>,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

/// Whether the calling thread has an open group.
pub(crate) fn in_group() -> bool {
    GROUP.with(|g| g.borrow().depth > 0)
}

/// Queues `h` for destruction at the outermost `HcclGroupEnd` (the library turns a destroy
/// inside a group into a job of the group).
pub(crate) fn defer_destroy(h: *mut c_void) {
    GROUP.with(|g| g.borrow_mut().destroys.push(h as usize));
}

/// The checks the library makes after the group branch, in its order (outside a group at the
/// call; inside one at the outermost `HcclGroupEnd`), and the stream work of the call:
/// * all-reduce, reduce-scatter: count (`HCCL_E_PARA`), type, op, prod on int16/bf16, reduce
///   type (all `HCCL_E_NOT_SUPPORT`);
/// * reduce: as all-reduce, with the root (`HCCL_E_PARA`) checked before the reduce type;
/// * all-gather: count, type; broadcast: count, type, root;
/// * send, receive: type (`HCCL_E_NOT_SUPPORT`), peer (`HCCL_E_PARA`); their count was checked at
///   the call.
pub(crate) fn deferred_checks(c: &Comm, call: &Call) -> Result<Work, HcclResult> {
    let n = c.world.nranks;
    match *call {
        Call::Coll(op) => {
            match op.kind {
                Kind::AllReduce | Kind::ReduceScatter => {
                    check_count(op.count)?;
                    check_dtype(op.dtype)?;
                    check_reduce_op(op.dtype, op.op)?;
                    check_reduce_dtype(op.dtype)?;
                }
                Kind::Reduce => {
                    check_count(op.count)?;
                    check_dtype(op.dtype)?;
                    check_reduce_op(op.dtype, op.op)?;
                    if op.root >= n {
                        return Err(HCCL_E_PARA);
                    }
                    check_reduce_dtype(op.dtype)?;
                }
                Kind::AllGather => {
                    check_count(op.count)?;
                    check_dtype(op.dtype)?;
                }
                Kind::Broadcast => {
                    check_count(op.count)?;
                    check_dtype(op.dtype)?;
                    if op.root >= n {
                        return Err(HCCL_E_PARA);
                    }
                }
                Kind::Barrier => {}
            }
            Ok(Work::Coll(op))
        }
        Call::P2p {
            send,
            buf,
            count,
            dtype,
            peer,
        } => {
            check_dtype(dtype)?;
            check_count(count)?;
            if peer >= n {
                return Err(HCCL_E_PARA);
            }
            // count ≤ SYS_MAX_COUNT and elements ≤ 16 bytes: the product fits.
            let es = dtype_size(dtype).unwrap_or(1);
            let bytes =
                usize::try_from(count.saturating_mul(es as u64)).map_err(|_| HCCL_E_PARA)?;
            Ok(Work::P2p(vec![P2p {
                send,
                buf,
                bytes,
                peer,
            }]))
        }
    }
}

/// Submits a call that passed the checks made before the group branch: inside a group it is
/// queued; outside one it gets the remaining checks, then (the double's own rule) a
/// communicator with an asynchronous error refuses it with that error, then it is launched on
/// `stream`.
pub(crate) fn submit(c: Arc<Comm>, stream: *mut c_void, call: Call) -> Result<(), HcclResult> {
    let queued = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return false;
        }
        g.queued.push((c.clone(), stream as usize, call));
        true
    });
    if queued {
        return Ok(());
    }
    let work = deferred_checks(&c, &call)?;
    match c.async_err.load(SeqCst) {
        0 => launch(c, stream, work),
        e => Err(e),
    }
}

/// Launches `work` on `stream` as a host task of the ACL simulator (`HCCL_E_NOT_SUPPORT` on a
/// capturing stream, `HCCL_E_RUNTIME` for another refusal).
pub(crate) fn launch(comm: Arc<Comm>, stream: *mut c_void, work: Work) -> Result<(), HcclResult> {
    let h = hooks()?;
    let job = Box::into_raw(Box::new(Job { comm, work }));
    // SAFETY: `run_job` takes ownership of `job` when it is called, which the ACL simulator
    // does exactly once unless the launch fails.
    let rc = unsafe { (h.launch)(stream, Some(run_job), job.cast()) };
    if rc != 0 {
        // SAFETY: the launch failed, so `run_job` will never see `job`: reclaim it.
        drop(unsafe { Box::from_raw(job) });
        return Err(if rc == ACL_ERROR_RT_FEATURE_NOT_SUPPORT {
            HCCL_E_NOT_SUPPORT
        } else {
            HCCL_E_RUNTIME
        });
    }
    Ok(())
}

/// `HcclGroupStart`: opens (or nests) the calling thread's group.
pub(crate) fn group_start() {
    GROUP.with(|g| g.borrow_mut().depth += 1);
}

/// `HcclGroupEnd`: `HCCL_E_NOT_SUPPORT` without an open group; an inner end only closes its
/// level. The outermost end runs the group as the library does: the destroys called inside it
/// first, then per communicator (in the order they first appear) [`launch_group_of`]. The
/// library returns `HCCL_SUCCESS` whatever the launches did; the double does too, except that
/// a launch its ACL simulator refused (a capturing stream, which the double does not support
/// and HCCL does) is returned, so that the refusal is not silent.
pub(crate) fn group_end() -> Result<(), HcclResult> {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return Err(HCCL_E_NOT_SUPPORT);
        }
        g.depth -= 1;
        Ok(if g.depth == 0 {
            Some((
                std::mem::take(&mut g.destroys),
                std::mem::take(&mut g.queued),
            ))
        } else {
            None
        })
    })?;
    let Some((destroys, queued)) = taken else {
        return Ok(());
    };
    for h in destroys {
        // The library ignores the result of the group's jobs.
        let _ = destroy(h as *mut c_void);
    }
    let mut order: Vec<Arc<Comm>> = Vec::new();
    for (c, _, _) in &queued {
        if !order.iter().any(|o| Arc::ptr_eq(o, c)) {
            order.push(c.clone());
        }
    }
    let mut first = Ok(());
    for c in order {
        let mine: Vec<(usize, Call)> = queued
            .iter()
            .filter(|(q, _, _)| Arc::ptr_eq(q, &c))
            .map(|&(_, s, k)| (s, k))
            .collect();
        if let Err(e) = launch_group_of(&c, &mine) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Bytes an operation moves, the key by which the library orders a group's collectives
/// (largest first).
fn volume(op: &Coll) -> u64 {
    op.count
        .saturating_mul(dtype_size(op.dtype).unwrap_or(0) as u64)
}

/// One communicator's part of a group, launched as the library does: its sends and receives
/// first, as one batch on the stream of the first of them; then its collectives, largest first
/// (ties in call order), each on its own stream. A call that fails its [`deferred_checks`]
/// ends this communicator's launches without an error (the rest of its group is not issued);
/// a launch the ACL simulator refuses ends them with that error.
fn launch_group_of(c: &Arc<Comm>, calls: &[(usize, Call)]) -> Result<(), HcclResult> {
    let mut items = Vec::new();
    let mut batch_stream = None;
    for (s, call) in calls {
        if let Call::P2p { .. } = call {
            batch_stream.get_or_insert(*s);
            match deferred_checks(c, call) {
                Ok(Work::P2p(v)) => items.extend(v),
                _ => return Ok(()),
            }
        }
    }
    if let Some(s) = batch_stream {
        launch(c.clone(), s as *mut c_void, Work::P2p(items))?;
    }
    let mut colls: Vec<(usize, Coll)> = calls
        .iter()
        .filter_map(|&(s, call)| match call {
            Call::Coll(op) => Some((s, op)),
            Call::P2p { .. } => None,
        })
        .collect();
    colls.sort_by_key(|(_, op)| std::cmp::Reverse(volume(op)));
    for (s, op) in colls {
        let Ok(work) = deferred_checks(c, &Call::Coll(op)) else {
            return Ok(());
        };
        launch(c.clone(), s as *mut c_void, work)?;
    }
    Ok(())
}

unsafe extern "C" fn run_job(user: *mut c_void, token: *const c_void) -> i32 {
    // SAFETY: `user` is the `Job` boxed by `launch`, handed over exactly once.
    let job = unsafe { Box::from_raw(user.cast::<Job>()) };
    if token.is_null() {
        return 0;
    }
    let c = &job.comm;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(c, &job.work, token)))
        .unwrap_or(Err(HCCL_E_INTERNAL));
    match r {
        Ok(()) => 0,
        Err(code) => {
            c.fail(code);
            if config().fault_stream {
                ACL_ERROR_RT_COMM_OP_RETRY_FAIL
            } else {
                0
            }
        }
    }
}

fn run(c: &Comm, work: &Work, token: *const c_void) -> Result<(), HcclResult> {
    let n = c.ops_started.fetch_add(1, SeqCst);
    match fault(c.rank, n) {
        // SAFETY: `_exit` ends the process at once (a rank that dies mid-job).
        Some(Fault::Die) => unsafe { libc::_exit(86) },
        Some(Fault::Stall) => return c.wait(token, config().exec_timeout, || false),
        None => {}
    }
    match c.async_err.load(SeqCst) {
        0 => {}
        e => return Err(e),
    }
    if c.destroyed.load(SeqCst) {
        return Err(HCCL_E_INTERNAL);
    }
    match work {
        Work::Coll(op) => collective(c, op, token),
        Work::P2p(items) => p2p(c, items, token),
    }
}

/// Copies `len` bytes from `src` to `dst` (distinct memory or exact overlap).
///
/// # Safety
/// Both ranges valid for `len` bytes.
unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    if len > 0 && !std::ptr::eq(dst, src) {
        // SAFETY: the caller guarantees both ranges; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src, dst, len) };
    }
}

fn descriptor(op: &Coll) -> [u64; 3] {
    [
        op.kind as u64 | (op.dtype as u64 & 0xff) << 8 | (op.op as u64 & 0xff) << 16,
        u64::from(op.root),
        op.count,
    ]
}

fn collective(c: &Comm, op: &Coll, token: *const c_void) -> Result<(), HcclResult> {
    let w = &c.world;
    let (me, n) = (c.rank, w.nranks);
    let es = dtype_size(op.dtype).ok_or(HCCL_E_PARA)?;
    let per = match op.kind {
        Kind::ReduceScatter => w.slot / (n as usize * es),
        _ => w.slot / es,
    }
    .max(1) as u64;
    let chunks = op.count.div_ceil(per).max(1);
    let d = descriptor(op);
    for (i, v) in d.iter().enumerate() {
        w.desc(me, i).store(*v, SeqCst);
    }
    let send = op.send as *mut u8;
    let recv = op.recv as *mut u8;
    let count = op.count as usize;
    // Every copy of this operation: within the user's buffers (promised valid for the
    // operation's sizes until it ran) and the world's slots (k·es ≤ slot, n·k·es ≤ slot for
    // reduce-scatter); a slot is written only by its rank, between barriers.
    let cp = |dst: *mut u8, src: *const u8, len: usize| {
        // SAFETY: see above.
        unsafe { copy(dst, src, len) }
    };
    for ch in 0..chunks {
        let off = (ch * per) as usize;
        let k = (per as usize).min(count - off.min(count));
        let kb = k * es;
        let mine = w.slot_ptr(me);
        let at = off * es;
        match op.kind {
            Kind::AllReduce | Kind::Reduce | Kind::AllGather => cp(mine, send.wrapping_add(at), kb),
            Kind::Broadcast if me == op.root => cp(mine, recv.wrapping_add(at), kb),
            Kind::ReduceScatter => {
                for j in 0..n as usize {
                    cp(
                        mine.wrapping_add(j * kb),
                        send.wrapping_add((j * count + off) * es),
                        kb,
                    );
                }
            }
            _ => {}
        }
        c.barrier(token)?;
        if ch == 0 {
            let same = (0..n).all(|r| (0..3).all(|i| w.desc(r, i).load(SeqCst) == d[i]));
            if !same {
                return Err(HCCL_E_PARA);
            }
        }
        let reduce_into = |dst: *mut u8, from: usize| {
            let mut acc = vec![0u8; kb];
            cp(acc.as_mut_ptr(), w.slot_ptr(0).wrapping_add(from), kb);
            for r in 1..n {
                // SAFETY: inside the slot of `r`, which nobody writes before the next barrier.
                let s = unsafe { std::slice::from_raw_parts(w.slot_ptr(r).add(from), kb) };
                fold(&mut acc, s, op.dtype, op.op);
            }
            cp(dst, acc.as_ptr(), kb);
        };
        match op.kind {
            Kind::AllReduce => reduce_into(recv.wrapping_add(at), 0),
            Kind::Reduce if me == op.root => reduce_into(recv.wrapping_add(at), 0),
            Kind::ReduceScatter => reduce_into(recv.wrapping_add(at), me as usize * kb),
            Kind::AllGather => {
                for r in 0..n as usize {
                    cp(
                        recv.wrapping_add((r * count + off) * es),
                        w.slot_ptr(r as u32),
                        kb,
                    );
                }
            }
            Kind::Broadcast if me != op.root => cp(recv.wrapping_add(at), w.slot_ptr(op.root), kb),
            _ => {}
        }
        c.barrier(token)?;
    }
    Ok(())
}

/// Progress state of one send or receive.
struct Flow {
    p: P2p,
    /// Bytes of header + payload moved so far.
    done: usize,
    hdr: [u8; 8],
}

impl Flow {
    fn total(&self) -> usize {
        8 + self.p.bytes
    }
}

/// Moves what the ring allows for `f`; `Ok(true)` when bytes moved.
fn step(c: &Comm, f: &mut Flow) -> Result<bool, HcclResult> {
    let w = &c.world;
    let (src, dst) = if f.p.send {
        (c.rank, f.p.peer)
    } else {
        (f.p.peer, c.rank)
    };
    let (sent, consumed, data) = w.ring(src, dst);
    let (s, k) = (sent.load(SeqCst), consumed.load(SeqCst));
    let ring = RING_BYTES as u64;
    let pos = if f.p.send { s } else { k };
    let room = if f.p.send { ring - (s - k) } else { s - k } as usize;
    let mut n = room.min(f.total() - f.done);
    if n == 0 {
        return Ok(false);
    }
    let mut at = pos;
    while n > 0 {
        let rp = (at % ring) as usize;
        let mut seg = n.min(RING_BYTES - rp);
        // The header and the payload are moved separately.
        if f.done < 8 {
            seg = seg.min(8 - f.done);
        }
        let rptr = data.wrapping_add(rp);
        let uptr: *mut u8 = if f.done < 8 {
            f.hdr.as_mut_ptr().wrapping_add(f.done)
        } else {
            (f.p.buf as *mut u8).wrapping_add(f.done - 8)
        };
        // SAFETY: `rp + seg` ≤ ring size, inside the pair's ring (only the sender writes
        // unsent room, only the receiver reads sent bytes); the user buffer was promised valid
        // for `bytes` and `done - 8 + seg` ≤ `bytes`; the header is a local of 8 bytes.
        unsafe {
            if f.p.send {
                copy(rptr, uptr, seg);
            } else {
                copy(uptr, rptr, seg);
            }
        }
        f.done += seg;
        at += seg as u64;
        n -= seg;
        if !f.p.send && f.done == 8 && u64::from_le_bytes(f.hdr) != f.p.bytes as u64 {
            // A receive whose size differs from the message's.
            return Err(HCCL_E_PARA);
        }
    }
    if f.p.send {
        sent.store(at, SeqCst);
    } else {
        consumed.store(at, SeqCst);
    }
    Ok(true)
}

fn p2p(c: &Comm, items: &[P2p], token: *const c_void) -> Result<(), HcclResult> {
    let mut flows: Vec<Flow> = items
        .iter()
        .map(|&p| Flow {
            p,
            done: 0,
            // A send's header is its size; a receive's is read into it.
            hdr: if p.send {
                (p.bytes as u64).to_le_bytes()
            } else {
                [0; 8]
            },
        })
        .collect();
    let mut waiter = Waiter::new(c, token, config().exec_timeout);
    loop {
        // Whether a peer of an unfinished flow had departed before this pass: a peer departs
        // after its last write, so a pass that starts after seeing it gone sees all it wrote
        // (checking after the pass could fail a flow whose data arrived during it).
        let gone_before = {
            let w = &c.world;
            flows
                .iter()
                .any(|f| f.done < f.total() && w.departed(f.p.peer).load(SeqCst) != 0)
        };
        let mut busy: Vec<(bool, u32)> = Vec::new();
        let mut moved = false;
        let mut left = false;
        for f in flows.iter_mut().filter(|f| f.done < f.total()) {
            left = true;
            let key = (f.p.send, f.p.peer);
            // Messages to (or from) one peer move in call order.
            if busy.contains(&key) {
                continue;
            }
            busy.push(key);
            moved |= step(c, f)?;
        }
        if !left {
            return Ok(());
        }
        if moved {
            waiter.progressed();
        } else {
            // Nothing moved although a peer of an unfinished flow had already departed
            // before this pass: it will never move it.
            if gone_before {
                return Err(HCCL_E_REMOTE);
            }
            waiter.idle()?;
        }
    }
}
