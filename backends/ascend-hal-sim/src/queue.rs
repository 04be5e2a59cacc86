//! Submission queues, logic completion queues and the in-order execution of STARS entries.
//!
//! The runtime for a 910B (`libruntime_v100.so`) builds 64-byte STARS entries
//! (`core/inc/sqe/v100/stars_sqe.hpp`, `stars_dma.hpp`, header `rtStarsSqeHeader_t` in
//! `pkg_inc/runtime/rt_external_stars_define.h`) and hands them to `halSqTaskSend` for a stream's
//! SQ. It learns progress two ways: the SQ head (`halSqCqQuery`, `DRV_SQCQ_PROP_SQ_HEAD`) and
//! 32-byte completion entries (`rtLogicCqReport_t` / `rtCqReport_t`,
//! `core/inc/task/task_info_base.hpp`) read with `halCqReportRecv` from the logic CQ bound to the
//! stream (`LogicCqAllocate*`: `info[0]` is the stream id). An entry asks for a completion entry
//! with the header's `wr_cqe` bit.
//!
//! Each SQ has a worker thread that executes its entries in submission order, asynchronously to
//! `halSqTaskSend`; the SQ head advances as entries finish. A STARS event is a flag: an
//! event-record entry (on any SQ, or the runtime's reply to a blocking host callback) sets it, an
//! event-wait entry holds its SQ until it is set and leaves it set, and an event-reset entry (a
//! write-value entry with sub-type `RT_STARS_WRITE_VALUE_SUB_TYPE_EVENT_RESET`, the event id in
//! word 6: `ConstructSqeForEventResetTask`, `core/src/task/task_info/event/event_task_v100.cc`,
//! which writes 0 to the event's slot of the event table) clears it. The runtime sends the reset
//! itself where it wants a record used once (`Event::Reset`, `core/src/event/event.cc`, and after
//! the wait that follows a blocking host callback); a wait that cleared the flag as well would let
//! only one of the streams waiting for one record through, while `Event::WaitSendCheck` gives all
//! of them a wait for the same id with no reset between.
//!
//! Host callbacks: the runtime sends them as AI CPU-type entries with topic 26
//! (`EVENT_TS_CALLBACK_MSG`, `RtStarsHostfuncCallbackSqe` in `core/inc/sqe/v100/stars_kernel.hpp`);
//! the worker turns each into an `rtHostFuncCqReport_t` (`core/inc/task/task.hpp`) on the callback
//! CQ the entry names, which the runtime's report loop collects with `halCqReportIrqWait` /
//! `halCqReportGet`.
//!
//! # Why one file of this size
//! The SQs, the logic and callback CQs, their workers and the event flags are one state machine
//! under one lock: an id handed out, a worker waking, a completion posted and an event set must be
//! read together to see why the runtime gets the answer it gets (the exit crash and the hang of
//! round three were each a mismatch between two of them).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use xstream_core::sync::lock;

use crate::{cond, memory};

/// Size of one STARS submission entry.
pub const SQE_SIZE: usize = 64;
/// Size of one logic completion entry.
pub const CQE_SIZE: usize = 32;
/// SQ depth reported when the runtime asks (`DRV_SQCQ_PROP_SQ_DEPTH`).
pub const DEFAULT_SQ_DEPTH: u32 = 2048;

/// STARS entry types (`rtStarsSqeType`).
pub mod sqe_type {
    /// FFTS (AI Core kernels).
    pub const FFTS: u8 = 0;
    /// AI CPU kernels.
    pub const AICPU: u8 = 1;
    /// Place holder (maintenance, copies without SDMA, …): the sub-type is `task_type`.
    pub const PLACE_HOLDER: u8 = 3;
    /// Event record.
    pub const EVENT_RECORD: u8 = 4;
    /// Event wait.
    pub const EVENT_WAIT: u8 = 5;
    /// Notify record.
    pub const NOTIFY_RECORD: u8 = 6;
    /// Notify wait.
    pub const NOTIFY_WAIT: u8 = 7;
    /// Write value (event reset).
    pub const WRITE_VALUE: u8 = 8;
    /// SDMA copy.
    pub const SDMA: u8 = 11;
    /// DSA (the random-number task, [`crate::dsa`]).
    pub const DSA: u8 = 15;
    /// PCIe DMA copy.
    pub const PCIE_DMA: u8 = 17;
}

/// Error code written into a completion entry for an entry this emulation refuses (kernels, or a
/// copy outside device memory). The runtime treats any non-zero `errorCode` as a task failure.
pub const ERR_REFUSED: u32 = 0x1;

/// One decoded completion entry (`rtLogicCqReport_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// Stream id from the entry's header.
    pub stream_id: u16,
    /// Task id from the entry's header.
    pub task_id: u16,
    /// 0 on success.
    pub error_code: u32,
    /// STARS error type (0 on success).
    pub error_type: u8,
    /// The entry's type.
    pub sqe_type: u8,
    /// The SQ it came from.
    pub sq_id: u16,
    /// The SQ head after the entry.
    pub sq_head: u16,
    /// Time stamp (ticks of the 50 MHz task clock, [`now_ticks`]).
    pub timestamp: u64,
}

impl Cqe {
    /// The 32-byte wire form.
    pub fn to_bytes(&self) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        b[0..2].copy_from_slice(&self.stream_id.to_le_bytes());
        b[2..4].copy_from_slice(&self.task_id.to_le_bytes());
        b[4..8].copy_from_slice(&self.error_code.to_le_bytes());
        b[8] = self.error_type;
        b[9] = self.sqe_type;
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.sq_head.to_le_bytes());
        // b[14..16]: flags (match/drop/error bits) stay 0; errorBit when failed.
        if self.error_code != 0 {
            b[14] = 0b100;
        }
        b[16..24].copy_from_slice(&self.timestamp.to_le_bytes());
        b
    }
}

#[derive(Debug)]
struct Sq {
    depth: u32,
    head: u32,
    tail: u32,
    /// Entries submitted and not yet executed, oldest first.
    pending: VecDeque<[u8; SQE_SIZE]>,
    /// A zeroed page of emulated device memory standing for the SQ's register window; the
    /// runtime only embeds its address in entries (conditional and stream-activation tasks).
    reg_page: usize,
    /// Wakes this SQ's worker alone (new entries, a recorded event it may wait for, its
    /// release). One condition variable for every worker made each SQ release and each entry
    /// wake all of them: with the 2000 SQs of a device at its stream limit, destroying the
    /// streams took about 3 ms each, longer than a process's exit waits for them.
    wake: Arc<Condvar>,
}

/// Callback reports handed out together by `halCqReportGet`, and how many of them are not yet
/// released.
type Delivered = (Box<[[u8; CQE_SIZE]]>, usize);

#[derive(Debug, Default)]
struct State {
    sqs: BTreeMap<u32, Sq>,
    /// Logic CQs and their pending entries.
    cqs: BTreeMap<u32, VecDeque<[u8; CQE_SIZE]>>,
    /// Stream id → logic CQ (from the logic CQ allocation's `info[0]`).
    stream_cq: BTreeMap<u32, u32>,
    /// Event id → time stamp of its last record.
    events: BTreeMap<u32, u64>,
    /// Events whose flag is set (recorded and not reset since).
    recorded: std::collections::BTreeSet<u32>,
    /// Callback CQs: id → (group, pending reports).
    cb_cqs: BTreeMap<u32, (u32, VecDeque<[u8; CQE_SIZE]>)>,
    /// Reports handed out by `take_callbacks`, kept alive until released.
    /// Per callback CQ, each buffer handed out with the number of its reports not yet
    /// released, oldest first.
    cb_delivered: BTreeMap<u32, VecDeque<Delivered>>,
    /// Streams bound to a model (captured graph): stream id → model id.
    bound: BTreeMap<u16, u16>,
    /// The entries loaded into each model, per stream, in submission order.
    models: BTreeMap<u16, BTreeMap<u16, Vec<[u8; SQE_SIZE]>>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
static CQ_READY: Condvar = Condvar::new();
/// Wakes the threads that replay a model's entries when an event is recorded (SQ workers have
/// a condition variable each, [`Sq::wake`]).
static WORK: Condvar = Condvar::new();

/// Wakes the workers whose next entry waits for an event, and the model replays, after a
/// record.
fn wake_event_waiters(s: &State) {
    for q in s.sqs.values() {
        if q.pending
            .front()
            .is_some_and(|e| header(e).kind == sqe_type::EVENT_WAIT)
        {
            q.wake.notify_all();
        }
    }
    WORK.notify_all();
}

fn state() -> MutexGuard<'static, Option<State>> {
    lock(&STATE)
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut g = state();
    f(g.get_or_insert_with(State::default))
}

/// Ticks per millisecond of the 910B's task time stamps: the runtime divides two event
/// records' completion time stamps by this to get milliseconds (`Event::ElapsedTime`,
/// `core/src/event/event.cc`; `eventTimestampFreq = RT_CHIP_CLOUD_V2_TIMESTAMP_FREQ` = 50000,
/// `config/910_B_93/dev_info_reg.cc`, `core/inc/task/task_base.hpp`): a 50 MHz clock.
/// Nanoseconds there made `aclrtEventElapsedTime` 20 times too long.
pub const TICKS_PER_MS: u64 = 50_000;

/// The time stamp a completion entry carries: ticks of a [`TICKS_PER_MS`] clock.
pub fn now_ticks() -> u64 {
    now_ns() / (1_000_000 / TICKS_PER_MS)
}

/// Nanoseconds of the monotonic clock.
pub fn now_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// Allocates an SQ (with its physical CQ id, which the runtime keeps but never reads from) and
/// starts its worker; `None` when [`crate::limits::SQ_LIMIT`] SQs are live.
pub fn alloc_sq(want_sq: Option<u32>, depth: u32) -> Option<(u32, u32)> {
    if live_sqs() >= crate::limits::SQ_LIMIT {
        crate::trace!(
            "sq allocation refused: {} SQs live",
            crate::limits::SQ_LIMIT
        );
        return None;
    }
    let (sq, cq, wake) = alloc_sq_only(want_sq, depth);
    let spawned = std::thread::Builder::new()
        .name(format!("hal-sim-sq{sq}"))
        .spawn(move || worker(sq, wake));
    if spawned.is_err() {
        crate::trace!("sq {sq}: no worker thread; entries will not run");
    }
    Some((sq, cq))
}

/// Number of live SQs.
pub fn live_sqs() -> usize {
    with(|s| s.sqs.len())
}

/// The lowest id not in `map`, as a driver hands out SQ and CQ ids (lowest free first). Ids
/// that only grew made the SQ ids of a process that opened 1025 streams, closed them and
/// opened as many again pass 2048, and the runtime's `aclrtResetDevice` then crashed.
fn lowest_free<V>(map: &BTreeMap<u32, V>) -> u32 {
    let mut id = 0;
    for &k in map.keys() {
        if k != id {
            break;
        }
        id += 1;
    }
    id
}

/// Records a new SQ; returns its id, its (physical) CQ id and its worker's wake-up.
fn alloc_sq_only(want_sq: Option<u32>, depth: u32) -> (u32, u32, Arc<Condvar>) {
    with(|s| {
        let id = want_sq.unwrap_or_else(|| lowest_free(&s.sqs));
        let wake = Arc::new(Condvar::new());
        s.sqs.insert(
            id,
            Sq {
                depth: if depth == 0 { DEFAULT_SQ_DEPTH } else { depth },
                head: 0,
                tail: 0,
                pending: VecDeque::new(),
                reg_page: memory::alloc(REG_PAGE_SIZE as u64).unwrap_or(0),
                wake: wake.clone(),
            },
        );
        (id, id, wake)
    })
}

/// Allocates a logic CQ bound to `stream_id`.
pub fn alloc_logic_cq(want: Option<u32>, stream_id: u32) -> u32 {
    with(|s| {
        let id = want.unwrap_or_else(|| lowest_free(&s.cqs));
        s.cqs.entry(id).or_default();
        s.stream_cq.insert(stream_id, id);
        id
    })
}

/// Frees an SQ; `false` when unknown.
pub fn free_sq(id: u32) -> bool {
    let removed = with(|s| s.sqs.remove(&id));
    match removed {
        Some(q) => {
            q.wake.notify_all();
            if q.reg_page != 0 {
                memory::free(q.reg_page);
            }
            true
        }
        None => false,
    }
}

/// Size of the emulated SQ register window.
pub const REG_PAGE_SIZE: u32 = 4096;

/// Address of an SQ's emulated register window.
pub fn sq_reg_page(id: u32) -> Option<usize> {
    with(|s| s.sqs.get(&id).map(|q| q.reg_page))
}

/// Frees a logic CQ; `false` when unknown.
pub fn free_logic_cq(id: u32) -> bool {
    with(|s| {
        s.stream_cq.retain(|_, c| *c != id);
        s.cqs.remove(&id).is_some()
    })
}

/// Binds a stream to a logic CQ (used when the runtime names the stream in an SQ allocation).
pub fn bind_stream(stream_id: u32, cq: u32) {
    with(|s| {
        s.stream_cq.insert(stream_id, cq);
    });
}

/// (head, tail, depth) of an SQ.
pub fn sq_state(id: u32) -> Option<(u32, u32, u32)> {
    with(|s| s.sqs.get(&id).map(|q| (q.head, q.tail, q.depth)))
}

/// Decoded header fields of one entry.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// Entry type (6 bits).
    pub kind: u8,
    /// Write a completion entry.
    pub wr_cqe: bool,
    /// For place-holder entries: the runtime's task type; otherwise the block dimension.
    pub word1: u16,
    /// Stream id.
    pub stream_id: u16,
    /// Task id.
    pub task_id: u16,
}

/// Decodes the 8-byte header.
pub fn header(e: &[u8; SQE_SIZE]) -> Header {
    Header {
        kind: e[0] & 0x3f,
        wr_cqe: (e[1] >> 6) & 1 == 1,
        word1: u16::from_le_bytes([e[2], e[3]]),
        stream_id: u16::from_le_bytes([e[4], e[5]]),
        task_id: u16::from_le_bytes([e[6], e[7]]),
    }
}

/// The little-endian word at byte `o` of an entry.
pub(crate) fn u32_at(e: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([e[o], e[o + 1], e[o + 2], e[o + 3]])
}
/// The little-endian 64-bit value at byte `o` of an entry.
pub(crate) fn u64_at(e: &[u8], o: usize) -> u64 {
    u64::from(u32_at(e, o)) | (u64::from(u32_at(e, o + 4)) << 32)
}

/// `TS_TASK_TYPE_MEMCPY_ASYNC_WITHOUT_SDMA` (place-holder copy).
const TASK_MEMCPY_WITHOUT_SDMA: u16 = 90;

/// Executes one entry that touches only memory (copies, place-holders) or is refused; returns
/// the error code for its completion (0: success).
fn execute_data(e: &[u8; SQE_SIZE], h: &Header) -> u32 {
    match h.kind {
        sqe_type::SDMA => {
            let ptr_mode = e[15] & 1;
            let word = u32_at(e, 16);
            let opcode = word & 0xff;
            if ptr_mode != 0 {
                crate::trace!("SDMA entry with ptr_mode={ptr_mode} opcode={opcode}: refused");
                return ERR_REFUSED;
            }
            let d2d_offset = (word >> 28) & 1 == 1;
            let len = u32_at(e, 28) as usize;
            let mut src = u64_at(e, 32) as usize;
            let mut dst = u64_at(e, 40) as usize;
            if d2d_offset {
                src += (u64::from(u32_at(e, 48))
                    | (u64::from(u16::from_le_bytes([e[56], e[57]])) << 32))
                    as usize;
                dst += (u64::from(u32_at(e, 52))
                    | (u64::from(u16::from_le_bytes([e[58], e[59]])) << 32))
                    as usize;
            }
            if opcode != 0 {
                return if crate::reduce::execute(opcode, dst, src, len) {
                    0
                } else {
                    ERR_REFUSED
                };
            }
            crate::trace!("SDMA copy {len} bytes {src:#x} -> {dst:#x}");
            if memory::copy(dst, src, len) {
                0
            } else {
                ERR_REFUSED
            }
        }
        sqe_type::PCIE_DMA => {
            let converted = e[28] & 1 == 1;
            if converted {
                // sq_addr (words 4-5) is the handle `drvMemConvertAddr` returned.
                let handle = u64_at(e, 16);
                let Some((src, dst, len)) = memory::dma_get(handle) else {
                    crate::trace!("PCIe DMA entry names unknown descriptor {handle:#x}: refused");
                    return ERR_REFUSED;
                };
                crate::trace!("PCIe DMA (converted) copy {len} bytes {src:#x} -> {dst:#x}");
                return if memory::copy(dst, src, len) {
                    0
                } else {
                    ERR_REFUSED
                };
            }
            let src = u64_at(e, 32) as usize;
            let dst = u64_at(e, 40) as usize;
            let len = u64_at(e, 48) as usize;
            crate::trace!("PCIe DMA copy {len} bytes {src:#x} -> {dst:#x}");
            if memory::copy(dst, src, len) {
                0
            } else {
                ERR_REFUSED
            }
        }
        sqe_type::PLACE_HOLDER => {
            if h.word1 == TASK_MEMCPY_WITHOUT_SDMA {
                let src = u64_at(e, 16) as usize;
                let dst = u64_at(e, 24) as usize;
                let len = u32_at(e, 32) as usize;
                crate::trace!("place-holder copy {len} bytes {src:#x} -> {dst:#x}");
                return if memory::copy(dst, src, len) {
                    0
                } else {
                    ERR_REFUSED
                };
            }
            crate::trace!("place-holder task_type {} completes", h.word1);
            0
        }
        sqe_type::DSA => {
            if crate::dsa::execute(e) {
                0
            } else {
                ERR_REFUSED
            }
        }
        sqe_type::FFTS | sqe_type::AICPU => {
            crate::trace!(
                "kernel entry (type {}): no AI Core / AI CPU here, refused",
                h.kind
            );
            ERR_REFUSED
        }
        other => {
            crate::trace!("entry type {other}: not emulated, refused");
            ERR_REFUSED
        }
    }
}

/// `TS_TASK_TYPE_MODEL_MAINTAINCE` (place-holder task binding streams to models).
const TASK_MODEL_MAINTENANCE: u16 = 12;

/// A model maintenance entry (`RtStarsModelMaintaince` at byte 16 of the place-holder entry:
/// model id, stream id, operation; `ConstructSqeForModelMaintainceTask`,
/// `core/src/task/task_info/model/model_maintaince_task_v100.cc`): `MMT_STREAM_ADD` (0) binds the
/// stream to the model, so that its later entries are loaded into the model instead of run;
/// `MMT_STREAM_DEL` (1) unbinds it and drops what it loaded; `MMT_MODEL_DESTROY` (3) drops the
/// model. The other operations (load complete, pre-processing, abort) change nothing here.
fn model_maintenance(s: &mut State, e: &[u8; SQE_SIZE]) {
    let model = u16::from_le_bytes([e[16], e[17]]);
    let stream = u16::from_le_bytes([e[18], e[19]]);
    let op = u16::from_le_bytes([e[20], e[21]]);
    crate::trace!("model maintenance: operation {op}, model {model}, stream {stream}");
    match op {
        0 => bind_to_model(&mut s.bound, e),
        1 => {
            s.bound.remove(&stream);
            if let Some(m) = s.models.get_mut(&model) {
                m.remove(&stream);
            }
        }
        3 => {
            s.bound.retain(|_, m| *m != model);
            s.models.remove(&model);
        }
        _ => {}
    }
}

/// `MMT_STREAM_ADD`: binds the stream an entry names to its model.
fn bind_to_model(bound: &mut BTreeMap<u16, u16>, e: &[u8; SQE_SIZE]) {
    let model = u16::from_le_bytes([e[16], e[17]]);
    let stream = u16::from_le_bytes([e[18], e[19]]);
    bound.insert(stream, model);
}

/// Runs a model's loaded entries: each stream's in order, the streams side by side (one thread
/// each, so that an event one records and another waits for inside the model resolves); returns
/// the first error code (0: all succeeded). This is the effect of the runtime's model-execute
/// conditional entry (`CONDS_SUB_TYPE_MODEL_EXEC`, model id at byte 12;
/// `ConstructSqeForModelExecuteTask`, `core/src/task/task_info/model/model_execute_task_v100.cc`)
/// on a captured graph: every replay runs what the capture loaded, from the start. Its condition
/// program (which activates the model's streams on the device) is not interpreted.
fn run_model(streams: Vec<Vec<[u8; SQE_SIZE]>>) -> u32 {
    let handles: Vec<_> = streams
        .into_iter()
        .map(|entries| {
            std::thread::Builder::new()
                .name("hal-sim-model".into())
                .spawn(move || {
                    entries
                        .iter()
                        .map(replay_entry)
                        .find(|&err| err != 0)
                        .unwrap_or(0)
                })
        })
        .collect();
    let mut first = 0;
    for h in handles {
        let err = match h {
            Ok(h) => h.join().unwrap_or(ERR_REFUSED),
            Err(_) => ERR_REFUSED,
        };
        if first == 0 {
            first = err;
        }
    }
    first
}

/// Executes one entry of a model replay (no SQ of its own: no completion entry, no head).
fn replay_entry(e: &[u8; SQE_SIZE]) -> u32 {
    let h = header(e);
    match h.kind {
        sqe_type::EVENT_RECORD => {
            record_event(event_id(e));
            0
        }
        sqe_type::EVENT_WAIT => {
            let id = event_id(e);
            let mut g = state();
            loop {
                let s = g.get_or_insert_with(State::default);
                if s.recorded.contains(&id) {
                    return 0;
                }
                g = WORK.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        sqe_type::NOTIFY_RECORD | sqe_type::NOTIFY_WAIT => 0,
        sqe_type::WRITE_VALUE => {
            match event_reset_id(e) {
                Some(id) => {
                    with(|s| s.recorded.remove(&id));
                }
                None => {
                    cond::write_value(e);
                }
            }
            0
        }
        cond::SQE_COND => match cond::value_wait(e) {
            Some(w) => loop {
                match w.holds() {
                    Some(true) => return 0,
                    Some(false) => std::thread::sleep(Duration::from_millis(1)),
                    None => return ERR_REFUSED,
                }
            },
            None => ERR_REFUSED,
        },
        _ if is_callback(e, &h) => {
            crate::trace!("host callback inside a model: not emulated, refused");
            ERR_REFUSED
        }
        _ => execute_data(e, &h),
    }
}

/// `topicId` of a host-callback entry (`EVENT_TS_CALLBACK_MSG`).
const TOPIC_TS_CALLBACK: u32 = 26;

/// Whether an AI CPU-type entry is a host callback (word 14: subTopicId 12 bits, topicId 6 bits).
fn is_callback(e: &[u8; SQE_SIZE], h: &Header) -> bool {
    h.kind == sqe_type::AICPU && (u32_at(e, 56) >> 12) & 0x3f == TOPIC_TS_CALLBACK
}

/// Builds the `rtHostFuncCqReport_t` for a callback entry; returns (callback CQ, report).
fn callback_report(e: &[u8; SQE_SIZE], sq_id: u32, head: u32) -> (u32, [u8; CQE_SIZE]) {
    let cq = u32::from(u16::from_le_bytes([e[16], e[17]]));
    let stream = [e[22], e[23]];
    let event = [e[24], e[25]];
    let block = u16::from_le_bytes([e[26], e[27]]) != 0;
    let task = [e[28], e[29]];
    let func = u64::from(u32_at(e, 32)) | (u64::from(u32_at(e, 36)) << 32);
    let data = u64::from(u32_at(e, 40)) | (u64::from(u32_at(e, 44)) << 32);
    let mut r = [0u8; CQE_SIZE];
    // phase 1, SOP 1, EOP 1, cqId in the upper 12 bits.
    let flags: u16 = 0b1011 | ((cq as u16 & 0xfff) << 4);
    r[0..2].copy_from_slice(&flags.to_le_bytes());
    r[2..4].copy_from_slice(&stream);
    r[4..6].copy_from_slice(&task);
    r[6..8].copy_from_slice(&(sq_id as u16).to_le_bytes());
    r[8..10].copy_from_slice(&(head as u16).to_le_bytes());
    r[12] = u8::from(block);
    r[14..16].copy_from_slice(&event);
    r[16..24].copy_from_slice(&func.to_le_bytes());
    r[24..32].copy_from_slice(&data.to_le_bytes());
    (cq, r)
}

/// `RT_STARS_WRITE_VALUE_SUB_TYPE_EVENT_RESET` (`core/inc/stars/stars_base.hpp`).
const WRITE_VALUE_SUB_EVENT_RESET: u32 = 1;

/// The event a write-value entry resets (`sub_type` word 7 = event reset, event id in word 6),
/// if it is an event reset.
fn event_reset_id(e: &[u8; SQE_SIZE]) -> Option<u32> {
    (u32_at(e, 28) == WRITE_VALUE_SUB_EVENT_RESET).then(|| u32_at(e, 24))
}

/// Event id of an event record / wait entry (`RtStarsEventSqe`: `eventId` at byte 8).
fn event_id(e: &[u8; SQE_SIZE]) -> u32 {
    u32::from(u16::from_le_bytes([e[8], e[9]]))
}

/// The worker of SQ `sq_id`: executes its entries in order until the SQ is freed.
/// `wake` identifies the SQ this worker serves: its id may be freed and handed out again before
/// the worker starts or while it runs, and a worker finding another SQ under its id leaves.
fn worker(sq_id: u32, wake: Arc<Condvar>) {
    let mut g = state();
    loop {
        let s = g.get_or_insert_with(State::default);
        // Ids are reused: an SQ of the same id made after this one was freed is not ours.
        let Some(q) = s.sqs.get(&sq_id).filter(|q| Arc::ptr_eq(&q.wake, &wake)) else {
            return;
        };
        let Some(e) = q.pending.front().copied() else {
            g = wake.wait(g).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let h = header(&e);
        if h.kind == sqe_type::EVENT_WAIT {
            let id = event_id(&e);
            if !s.recorded.contains(&id) {
                g = wake.wait(g).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            crate::trace!("sq {sq_id}: event {id} wait satisfied");
        }
        if h.kind == sqe_type::PLACE_HOLDER && h.word1 == TASK_MODEL_MAINTENANCE {
            model_maintenance(s, &e);
        }
        let mut cond_err = 0;
        if h.kind == cond::SQE_COND && e[8] == cond::SUB_MODEL_EXEC {
            let model = u16::from_le_bytes([e[12], e[13]]);
            let streams: Vec<Vec<[u8; SQE_SIZE]>> = s
                .models
                .get(&model)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            crate::trace!("sq {sq_id}: model {model} runs ({} streams)", streams.len());
            drop(g);
            cond_err = run_model(streams);
            g = state();
        } else if h.kind == cond::SQE_COND {
            match cond::value_wait(&e).map(|w| (w, w.holds())) {
                Some((_, Some(true))) => crate::trace!("sq {sq_id}: value wait satisfied"),
                Some((_, Some(false))) => {
                    // Host writes into device memory wake no one: poll.
                    g = wake
                        .wait_timeout(g, Duration::from_millis(1))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
                Some((w, None)) => {
                    crate::trace!("sq {sq_id}: value wait on {:#x}: not device memory", w.addr);
                    cond_err = ERR_REFUSED;
                }
                None => {
                    crate::trace!(
                        "sq {sq_id}: conditional entry (sub-type {}) not emulated, refused",
                        e[8]
                    );
                    cond_err = ERR_REFUSED;
                }
            }
        }
        if h.kind == sqe_type::WRITE_VALUE {
            if let Some(id) = event_reset_id(&e) {
                g.get_or_insert_with(State::default).recorded.remove(&id);
                crate::trace!("sq {sq_id}: event {id} reset");
            } else if !cond::write_value(&e) {
                crate::trace!("sq {sq_id}: write value outside device memory: no effect");
            }
        }
        let data_path = !matches!(
            h.kind,
            sqe_type::EVENT_RECORD | sqe_type::EVENT_WAIT | cond::SQE_COND
        ) && !is_callback(&e, &h)
            && !matches!(
                h.kind,
                sqe_type::NOTIFY_RECORD | sqe_type::NOTIFY_WAIT | sqe_type::WRITE_VALUE
            );
        let err = if data_path {
            drop(g);
            let err = execute_data(&e, &h);
            g = state();
            err
        } else {
            cond_err
        };
        let s = g.get_or_insert_with(State::default);
        let Some(q) = s
            .sqs
            .get_mut(&sq_id)
            .filter(|q| Arc::ptr_eq(&q.wake, &wake))
        else {
            return;
        };
        q.pending.pop_front();
        q.head = (q.head + 1) % q.depth;
        let head = q.head;
        crate::trace!(
            "sq {sq_id}: entry type {} stream {} task {} done (err {err}), head {head}",
            h.kind,
            h.stream_id,
            h.task_id
        );
        match h.kind {
            sqe_type::EVENT_RECORD => {
                let id = event_id(&e);
                s.events.insert(id, now_ns());
                s.recorded.insert(id);
                wake_event_waiters(s);
            }
            _ if is_callback(&e, &h) => {
                let (cq, report) = callback_report(&e, sq_id, head);
                match s.cb_cqs.get_mut(&cq) {
                    Some((_, reports)) => reports.push_back(report),
                    None => crate::trace!("callback for unknown callback CQ {cq}: dropped"),
                }
            }
            _ => {}
        }
        if h.wr_cqe || err != 0 {
            let cqe = Cqe {
                stream_id: h.stream_id,
                task_id: h.task_id,
                error_code: err,
                error_type: 0,
                sqe_type: h.kind,
                sq_id: sq_id as u16,
                sq_head: head as u16,
                timestamp: now_ticks(),
            };
            let cq = s.stream_cq.get(&u32::from(h.stream_id)).copied();
            match cq.and_then(|c| s.cqs.get_mut(&c)) {
                Some(cq) => cq.push_back(cqe.to_bytes()),
                None => crate::trace!("no logic CQ for stream {}: completion dropped", h.stream_id),
            }
        }
        CQ_READY.notify_all();
    }
}

/// Submits `entries` to SQ `sq_id`: they join the SQ's queue and its worker runs them in order.
/// Returns `false` when the SQ is unknown.
pub fn submit(sq_id: u32, entries: &[[u8; SQE_SIZE]]) -> bool {
    let ok = with(|s| {
        let Some(q) = s.sqs.get_mut(&sq_id) else {
            return false;
        };
        for e in entries {
            let h = header(e);
            crate::trace!(
                "sq {sq_id}: submit type {} stream {} task {} wr_cqe {} word1 {}{}",
                h.kind,
                h.stream_id,
                h.task_id,
                h.wr_cqe,
                h.word1,
                if matches!(h.kind, sqe_type::EVENT_RECORD | sqe_type::EVENT_WAIT) {
                    format!(" event {}", event_id(e))
                } else {
                    String::new()
                }
            );
            q.tail = (q.tail + 1) % q.depth;
            if let Some(&model) = s.bound.get(&h.stream_id) {
                // A stream bound to a model (a captured graph): its entries are loaded into the
                // model as they arrive, not run; every model execution runs them.
                q.head = q.tail;
                crate::trace!("sq {sq_id}: task {} loaded into model {model}", h.task_id);
                s.models
                    .entry(model)
                    .or_default()
                    .entry(h.stream_id)
                    .or_default()
                    .push(*e);
                continue;
            }
            if h.kind == sqe_type::PLACE_HOLDER && h.word1 == TASK_MODEL_MAINTENANCE && e[20] == 0 {
                // MMT_STREAM_ADD binds at submission: the runtime sends the stream's entries
                // only after it (the bind entry asks the task scheduler first, `pre_p`).
                bind_to_model(&mut s.bound, e);
            }
            q.pending.push_back(*e);
        }
        q.wake.notify_all();
        true
    });
    ok
}

/// Records an event from the host (the runtime's reply to a blocking host callback).
pub fn record_event(event_id: u32) {
    with(|s| {
        s.events.insert(event_id, now_ns());
        s.recorded.insert(event_id);
        wake_event_waiters(s);
    });
}

/// Clears an event's flag: the driver hands out (or takes back) the event id. The runtime gives
/// every record of an event a fresh id from the driver (`Event::Record` →
/// `AllocEventIdResource`, `core/src/event/event.cc`; ids come back through `halResourceIdFree`
/// and are handed out again, lowest first) and never resets a fresh id itself, so an id must
/// start unset: a wait enqueued before its record has to hold.
pub fn clear_event(event_id: u32) {
    with(|s| {
        s.recorded.remove(&event_id);
    });
}

/// Callback CQ ids the driver hands out: the runtime's report loop reads which callback CQs have
/// reports from a bitmap of `HOST_CALLBACK_SQCQ_BIT` (1024) bits (`ApiImpl::ProcessReport`,
/// `api/impl/api_impl.cc`; `api/api.hpp`), so a callback CQ with a larger id would never be
/// served. Callback CQs have an id space of their own, apart from the SQs: numbering them with
/// the SQs gave the first callback CQ of a process that had opened 2000 streams an id past the
/// bitmap, and its reports were never collected (a synchronize waiting for a host callback spun
/// forever).
pub const CALLBACK_CQ_LIMIT: u32 = 1024;

/// Creates a callback CQ in `group` (its SQ has the same id); `None` when all
/// [`CALLBACK_CQ_LIMIT`] ids are in use.
pub fn alloc_callback_cq(group: u32) -> Option<u32> {
    with(|s| {
        let id = (0..CALLBACK_CQ_LIMIT).find(|i| !s.cb_cqs.contains_key(i))?;
        s.cb_cqs.insert(id, (group, VecDeque::new()));
        Some(id)
    })
}

/// Waits up to `timeout_ms` (negative: forever) until a callback CQ of `group` has reports;
/// returns the ids of those that have.
pub fn wait_callbacks(group: u32, timeout_ms: i32) -> Vec<u32> {
    let deadline =
        (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    let mut g = state();
    loop {
        let s = g.get_or_insert_with(State::default);
        let ready: Vec<u32> = s
            .cb_cqs
            .iter()
            .filter(|(_, (grp, r))| *grp == group && !r.is_empty())
            .map(|(&id, _)| id)
            .collect();
        if !ready.is_empty() {
            return ready;
        }
        match deadline {
            None => g = CQ_READY.wait(g).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Vec::new();
                }
                g = CQ_READY
                    .wait_timeout(g, d - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}

/// Moves the pending reports of callback CQ `cq` into a buffer that stays valid until all of
/// its reports were released ([`release_callbacks`]); returns its address and count.
pub fn take_callbacks(cq: u32) -> Option<(usize, usize)> {
    with(|s| {
        let (_, reports) = s.cb_cqs.get_mut(&cq)?;
        let buf: Box<[[u8; CQE_SIZE]]> = reports.drain(..).collect();
        let n = buf.len();
        let addr = buf.as_ptr() as usize;
        if n > 0 {
            s.cb_delivered.entry(cq).or_default().push_back((buf, n));
        }
        Some((addr, n))
    })
}

/// Releases `count` reports of callback CQ `cq`, oldest first; a buffer is freed once all its
/// reports are released. The runtime releases each report after handling it, one at a time,
/// and reads the next one from the same buffer afterwards (`ApiImpl::ProcessReport` loop,
/// `api/impl/api_impl.cc`: `CqReportRelease` with count 1 per report,
/// `driver/npu_driver_res.cc`): freeing the whole buffer on the first release lost the rest.
pub fn release_callbacks(cq: u32, count: usize) {
    with(|s| {
        let Some(bufs) = s.cb_delivered.get_mut(&cq) else {
            return;
        };
        let mut left = count;
        while left > 0 {
            let Some(front) = bufs.front_mut() else {
                break;
            };
            let n = left.min(front.1);
            front.1 -= n;
            left -= n;
            if front.1 == 0 {
                bufs.pop_front();
            }
        }
        if bufs.is_empty() {
            s.cb_delivered.remove(&cq);
        }
    });
}

/// Frees a callback CQ; `false` when unknown.
pub fn free_callback_cq(cq: u32) -> bool {
    with(|s| {
        s.cb_delivered.remove(&cq);
        s.cb_cqs.remove(&cq).is_some()
    })
}

/// Takes up to `max` completion entries from logic CQ `cq`, waiting up to `timeout_ms`
/// (negative: forever). `None` when the CQ is unknown.
pub fn receive(cq: u32, max: usize, timeout_ms: i32) -> Option<Vec<[u8; CQE_SIZE]>> {
    let deadline =
        (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    let mut g = state();
    loop {
        let s = g.get_or_insert_with(State::default);
        let q = s.cqs.get_mut(&cq)?;
        if !q.is_empty() || max == 0 {
            let n = q.len().min(max);
            return Some(q.drain(..n).collect());
        }
        match deadline {
            None => g = CQ_READY.wait(g).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Some(Vec::new());
                }
                g = CQ_READY
                    .wait_timeout(g, d - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}

/// Time stamp of an event's last record.
pub fn event_timestamp(event_id: u32) -> Option<u64> {
    with(|s| s.events.get(&event_id).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdma(stream: u16, task: u16, src: usize, dst: usize, len: u32) -> [u8; SQE_SIZE] {
        let mut e = [0u8; SQE_SIZE];
        e[0] = sqe_type::SDMA;
        e[1] = 1 << 6; // wr_cqe
        e[4..6].copy_from_slice(&stream.to_le_bytes());
        e[6..8].copy_from_slice(&task.to_le_bytes());
        e[28..32].copy_from_slice(&len.to_le_bytes());
        e[32..40].copy_from_slice(&(src as u64).to_le_bytes());
        e[40..48].copy_from_slice(&(dst as u64).to_le_bytes());
        e
    }

    #[test]
    fn sdma_entries_copy_in_order_and_report() {
        let stream = 900;
        let (sq, _) = alloc_sq(None, 16).unwrap();
        let cq = alloc_logic_cq(None, stream);
        let dev = memory::alloc(64).unwrap();
        let src = [5u8; 64];
        let mut back = [0u8; 64];
        let entries = [
            sdma(stream as u16, 1, src.as_ptr() as usize, dev, 64),
            sdma(stream as u16, 2, dev, back.as_mut_ptr() as usize, 64),
        ];
        assert!(submit(sq, &entries));
        // The worker runs them; wait for both completions (the bound only guards a hang).
        let mut got = Vec::new();
        while got.len() < 2 {
            let more = receive(cq, 8, 10_000).unwrap();
            assert!(!more.is_empty(), "completions did not arrive");
            got.extend(more);
        }
        assert_eq!(back, src);
        assert_eq!(sq_state(sq), Some((2, 2, 16)));
        assert_eq!(u16::from_le_bytes([got[1][2], got[1][3]]), 2);
        assert_eq!(
            u32::from_le_bytes([got[1][4], got[1][5], got[1][6], got[1][7]]),
            0
        );
        // A kernel entry is refused with a failed completion.
        let mut k = [0u8; SQE_SIZE];
        k[0] = sqe_type::FFTS;
        k[4..6].copy_from_slice(&(stream as u16).to_le_bytes());
        assert!(submit(sq, &[k]));
        let got = receive(cq, 8, 10_000).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            u32::from_le_bytes([got[0][4], got[0][5], got[0][6], got[0][7]]),
            ERR_REFUSED
        );
        assert!(!submit(u32::MAX, &entries), "an SQ id never handed out");
        assert!(memory::free(dev));
        assert!(free_sq(sq));
    }

    fn event_entry(kind: u8, stream: u16, event: u16) -> [u8; SQE_SIZE] {
        let mut e = [0u8; SQE_SIZE];
        e[0] = kind;
        e[1] = 1 << 6;
        e[4..6].copy_from_slice(&stream.to_le_bytes());
        e[8..10].copy_from_slice(&event.to_le_bytes());
        e
    }

    #[test]
    fn event_wait_holds_its_queue_until_recorded() {
        let (a, _) = alloc_sq(None, 16).unwrap();
        let (b, _) = alloc_sq(None, 16).unwrap();
        let cq = alloc_logic_cq(None, 901);
        let cq_a = alloc_logic_cq(None, 902);
        // Stream b waits for event 3000, then reports; nothing has recorded it.
        assert!(submit(b, &[event_entry(sqe_type::EVENT_WAIT, 901, 3000)]));
        assert!(receive(cq, 8, 50).unwrap().is_empty());
        assert_eq!(sq_state(b).map(|(h, _, _)| h), Some(0));
        // Stream a records it: b's wait completes.
        assert!(submit(a, &[event_entry(sqe_type::EVENT_RECORD, 902, 3000)]));
        let got = receive(cq, 8, 10_000).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0][9], sqe_type::EVENT_WAIT);
        assert!(event_timestamp(3000).is_some());
        // The wait leaves the flag set: a second wait passes on the same record.
        assert!(submit(b, &[event_entry(sqe_type::EVENT_WAIT, 901, 3000)]));
        assert_eq!(receive(cq, 8, 10_000).unwrap().len(), 1);
        // After a reset entry, a wait needs a new record; the host can give it (callback reply).
        let mut reset = [0u8; SQE_SIZE];
        reset[0] = sqe_type::WRITE_VALUE;
        reset[1] = 1 << 6;
        reset[4..6].copy_from_slice(&901u16.to_le_bytes());
        reset[24..28].copy_from_slice(&3000u32.to_le_bytes());
        reset[28..32].copy_from_slice(&WRITE_VALUE_SUB_EVENT_RESET.to_le_bytes());
        assert!(submit(
            b,
            &[reset, event_entry(sqe_type::EVENT_WAIT, 901, 3000)]
        ));
        assert_eq!(receive(cq, 8, 10_000).unwrap().len(), 1); // the reset
        assert!(receive(cq, 8, 50).unwrap().is_empty());
        record_event(3000);
        assert_eq!(receive(cq, 8, 10_000).unwrap().len(), 1);
        assert_eq!(receive(cq_a, 8, 10_000).unwrap().len(), 1);
        assert!(free_sq(a) && free_sq(b));
    }

    #[test]
    fn callback_entry_reports_on_its_callback_cq() {
        let group = 77;
        let cb = alloc_callback_cq(group).unwrap();
        let (sq, _) = alloc_sq(None, 16).unwrap();
        let mut e = [0u8; SQE_SIZE];
        e[0] = sqe_type::AICPU;
        e[16..18].copy_from_slice(&(cb as u16).to_le_bytes());
        e[22..24].copy_from_slice(&5u16.to_le_bytes()); // stream
        e[24..26].copy_from_slice(&9u16.to_le_bytes()); // event
        e[26..28].copy_from_slice(&1u16.to_le_bytes()); // blocking
        e[32..36].copy_from_slice(&0x1234u32.to_le_bytes()); // function
        e[40..44].copy_from_slice(&0x5678u32.to_le_bytes()); // data
        e[56..60].copy_from_slice(&(TOPIC_TS_CALLBACK << 12).to_le_bytes());
        assert!(submit(sq, &[e]));
        assert_eq!(wait_callbacks(group, 10_000), vec![cb]);
        let (addr, n) = take_callbacks(cb).unwrap();
        assert_eq!(n, 1);
        // SAFETY: `take_callbacks` keeps the buffer alive until `release_callbacks`.
        let r = unsafe { *(addr as *const [u8; CQE_SIZE]) };
        assert_eq!(u16::from_le_bytes([r[2], r[3]]), 5);
        assert_eq!(r[12], 1);
        assert_eq!(u16::from_le_bytes([r[14], r[15]]), 9);
        assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), 0x1234);
        assert_eq!(u64::from_le_bytes(r[24..32].try_into().unwrap()), 0x5678);
        release_callbacks(cb, 1);
        // Nothing more in that group.
        assert!(wait_callbacks(group, 0).is_empty());
        // Two reports handed out together stay valid until both are released, one at a time,
        // as the runtime releases them.
        let mut e2 = e;
        e2[28..30].copy_from_slice(&7u16.to_le_bytes()); // task
        assert!(submit(sq, &[e, e2]));
        // Both run (the head passes them) before the reports are taken, so they come together.
        let t0 = Instant::now();
        while sq_state(sq).map(|(h, _, _)| h) != Some(3) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "entries did not run"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let (addr, n) = take_callbacks(cb).unwrap();
        assert_eq!(n, 2);
        let outstanding = || {
            with(|s| {
                s.cb_delivered
                    .get(&cb)
                    .map(|b| b.iter().map(|x| x.1).sum::<usize>())
            })
        };
        assert_eq!(outstanding(), Some(2));
        release_callbacks(cb, 1);
        assert_eq!(outstanding(), Some(1));
        // SAFETY: one report of the buffer is still unreleased, so the buffer is alive.
        let r2 = unsafe { *((addr as *const [u8; CQE_SIZE]).add(1)) };
        assert_eq!(u16::from_le_bytes([r2[4], r2[5]]), 7);
        release_callbacks(cb, 1);
        assert_eq!(outstanding(), None);
        assert!(free_callback_cq(cb) && free_sq(sq));
    }

    /// The two tests that open a thousand SQs run one at a time: each reads ids against the
    /// SQs live, which the other would change by a thousand.
    static MANY_SQS: Mutex<()> = Mutex::new(());

    #[test]
    fn callback_cq_ids_stay_inside_the_runtimes_bitmap() {
        let _one = lock(&MANY_SQS);
        // Many SQs first (no workers needed): the callback CQ's id must not follow theirs.
        let sqs: Vec<u32> = (0..CALLBACK_CQ_LIMIT + 100)
            .map(|_| alloc_sq_only(None, 16).0)
            .collect();
        let cb = alloc_callback_cq(78).unwrap();
        assert!(
            cb < CALLBACK_CQ_LIMIT,
            "callback CQ {cb} is past the runtime's {CALLBACK_CQ_LIMIT}-bit report bitmap"
        );
        // Freeing the callback CQ leaves the SQ of the same number alone.
        let same = sqs.contains(&cb);
        assert!(free_callback_cq(cb));
        if same {
            assert!(
                sq_state(cb).is_some(),
                "freeing callback CQ {cb} freed SQ {cb}"
            );
        }
        for sq in sqs {
            assert!(free_sq(sq));
        }
    }

    #[test]
    fn sq_ids_are_reused_lowest_first() {
        let _one = lock(&MANY_SQS);
        // Open, close and open again as many SQs as a device at its stream limit holds: the
        // ids stay inside the live count, as a driver's do (ids that only grew crashed the
        // runtime's device reset).
        let n = crate::limits::SQ_LIMIT as u32 / 2 + 1;
        for round in 0..2 {
            let sqs: Vec<u32> = (0..n).map(|_| alloc_sq_only(None, 16).0).collect();
            // Slack for the few SQs other tests open and close meanwhile.
            let live = live_sqs() as u32 + 16;
            assert!(
                sqs.iter().all(|&id| id < live),
                "round {round}: an SQ id past the live SQs (and slack), {live}: {:?}",
                sqs.iter().max()
            );
            for sq in sqs {
                assert!(free_sq(sq));
            }
        }
    }

    fn model_maintenance_entry(stream: u16, model: u16, bound: u16, op: u16) -> [u8; SQE_SIZE] {
        let mut e = [0u8; SQE_SIZE];
        e[0] = sqe_type::PLACE_HOLDER;
        e[1] = 1 << 6;
        e[2..4].copy_from_slice(&TASK_MODEL_MAINTENANCE.to_le_bytes());
        e[4..6].copy_from_slice(&stream.to_le_bytes());
        e[16..18].copy_from_slice(&model.to_le_bytes());
        e[18..20].copy_from_slice(&bound.to_le_bytes());
        e[20..22].copy_from_slice(&op.to_le_bytes());
        e
    }

    #[test]
    fn captured_entries_run_once_per_model_execution() {
        let (exec, model_stream, model) = (910u16, 911u16, 40u16);
        let (a, _) = alloc_sq(None, 16).unwrap();
        let (b, _) = alloc_sq(None, 16).unwrap();
        let cq = alloc_logic_cq(None, u32::from(exec));
        let dst = memory::alloc(8).unwrap();
        let one: [u8; 8] = [1.5f32.to_le_bytes(), 2.0f32.to_le_bytes()]
            .concat()
            .try_into()
            .unwrap();
        assert!(memory::copy(dst, one.as_ptr() as usize, 8));
        // Bind the model stream, then load an f32 SUM reduce (dst += one) into the model.
        assert!(submit(
            a,
            &[model_maintenance_entry(exec, model, model_stream, 0)]
        ));
        let mut r = sdma(model_stream, 1, one.as_ptr() as usize, dst, 8);
        r[16] = 0x71;
        assert!(submit(b, &[r]));
        assert_eq!(receive(cq, 8, 10_000).unwrap().len(), 1); // the bind entry
        let read = || {
            let mut v = [0u8; 8];
            assert!(memory::copy(v.as_mut_ptr() as usize, dst, 8));
            [
                f32::from_le_bytes(v[..4].try_into().unwrap()),
                f32::from_le_bytes(v[4..].try_into().unwrap()),
            ]
        };
        // Loaded at submission, not run: the SQ is drained and dst unchanged.
        assert_eq!(sq_state(b).map(|(h, t, _)| (h, t)), Some((1, 1)));
        assert_eq!(read(), [1.5, 2.0]);
        // Two executions of the model: two reduces.
        let mut x = [0u8; SQE_SIZE];
        x[0] = cond::SQE_COND;
        x[1] = 1 << 6;
        x[4..6].copy_from_slice(&exec.to_le_bytes());
        x[8] = cond::SUB_MODEL_EXEC;
        x[12..14].copy_from_slice(&model.to_le_bytes());
        assert!(submit(a, &[x, x]));
        let mut got = Vec::new();
        while got.len() < 2 {
            let more = receive(cq, 8, 10_000).unwrap();
            assert!(!more.is_empty(), "model executions did not complete");
            got.extend(more);
        }
        assert!(got.iter().all(|c| c[4..8] == [0, 0, 0, 0]));
        assert_eq!(read(), [4.5, 6.0]);
        // Unbinding drops what the stream loaded: a third execution changes nothing.
        assert!(submit(
            a,
            &[model_maintenance_entry(exec, model, model_stream, 1), x]
        ));
        let mut got = Vec::new();
        while got.len() < 2 {
            got.extend(receive(cq, 8, 10_000).unwrap());
        }
        assert_eq!(read(), [4.5, 6.0]);
        assert!(memory::free(dst));
        assert!(free_sq(a) && free_sq(b));
    }
}
