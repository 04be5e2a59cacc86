//! A driver emulation standing in for `libascend_hal.so` under the open-source CANN runtime
//! (`hicann/runtime`), on a machine with no NPU.
//!
//! This is a **test double**, not hardware: it lets the vendor's own runtime (`libacl_rt.so`,
//! `libruntime.so`, `libruntime_v100.so`) start, create streams and move data on a CPU, so that the
//! runtime's stream / event / memory code can be exercised without a device. It emulates one
//! Ascend 910B4 (chip type 5 in the runtime's `soc_define.hpp`, the STARS task format of
//! `libruntime_v100.so`):
//!
//! * device discovery and the device-information values the runtime's start-up reads
//!   ([`devinfo`]);
//! * device memory backed by host memory, with host↔device and device↔device copies ([`memory`]);
//! * SDMA reduce entries, executed on the host ([`reduce`]); DSA entries, the random-number
//!   task, run with xstream-core's reference generator ([`dsa`]); value writes and value waits
//!   (write-value entries, and the conditional entries of the runtime's value-wait template,
//!   [`cond`]);
//! * submission queues (SQ) and logic completion queues (CQ): every 64-byte STARS entry handed to
//!   `halSqTaskSend` is executed in order by the SQ's worker thread, the SQ head advances, and a
//!   completion entry is queued for the stream's logic CQ when the entry asks for one; event
//!   waits hold their SQ until the event is recorded; host callbacks are reported on their
//!   callback CQ ([`queue`]).
//!
//! * virtual memory: address space reserved, physical memory created, mapped and unmapped, as
//!   the ACL virtual memory functions ask it of the driver ([`vmm`]);
//! * the id spaces (streams, events, notifies, …) of the chip, refused at its limits as a driver
//!   refuses ([`limits`]).
//!
//! Kernels are not run (there is no AI Core here): an AI Core / AI CPU entry completes with an
//! error report, never silently. Every exported function catches panics.
//!
//! Setting `XSTREAM_HAL_SIM_TRACE=1` prints each driver call this library answers to stderr.

pub mod codes;
pub mod cond;
pub mod devinfo;
pub mod dsa;
mod exports;
pub mod fallback;
pub mod limits;
pub mod memory;
pub mod queue;
pub mod reduce;
pub mod trace;
pub mod vmm;
