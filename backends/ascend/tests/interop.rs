//! Raw-handle interop, as a vendor operator library (aclnn-style calls take an `aclrtStream`)
//! meets xstream: a stream handed out with `as_raw` and used by a plain C-ABI call orders with
//! xstream's work; a stream and an event created by C code are borrowed with `from_raw`, used
//! by xstream and destroyed by their owner. The C calls go through symbols looked up directly
//! in the simulator library, not through xstream's table.
#![allow(unsafe_code)]
mod common;

use std::ffi::c_void;
use std::ptr::null_mut;
use std::time::Duration;

use xstream_ascend::sys::{RawEvent, RawStream};
use xstream_ascend::{AscendEvent, AscendStream};
use xstream_core::{lcg_reference, Device, Error, Event, Kernel, Stream, StreamDesc};

type MemsetAsync = unsafe extern "C" fn(*mut c_void, usize, i32, usize, *mut c_void) -> i32;
type Create = unsafe extern "C" fn(*mut *mut c_void) -> i32;
type Destroy = unsafe extern "C" fn(*mut c_void) -> i32;
type Record = unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32;

/// The simulator library opened directly, as a vendor library would link it.
fn vendor() -> libloading::Library {
    let p = common::setup();
    // SAFETY: the simulator has no initialisers with preconditions.
    unsafe { libloading::Library::new(p) }.expect("open the simulator")
}

fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> T {
    // SAFETY: each name is an ACL export whose prototype is the type the caller asks for.
    *unsafe { lib.get::<T>(name) }.expect("ACL symbol")
}

#[test]
fn raw_stream_orders_with_xstream_work() {
    if !common::in_sim_process() {
        return;
    }
    let lib = vendor();
    let memset: MemsetAsync = sym(&lib, b"aclrtMemsetAsync\0");
    let d = common::device(0);
    let s = d.create_stream(&StreamDesc::new()).unwrap();
    let buf = d.alloc(16).unwrap();
    s.memset(&buf, 0, 16, 0).unwrap();
    // xstream work (a delay, then an LCG), the vendor call on the raw stream, xstream work
    // again. In order the result is lcg¹(0x01 bytes); a memset that ran at once (during the
    // delay) would give lcg²(0x01 bytes).
    s.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
        .unwrap();
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    let raw: RawStream = s.as_raw();
    d.bind().unwrap();
    // SAFETY: a live device pointer of 16 bytes and a live stream of the current context.
    let rc = unsafe { memset(buf.as_raw().0, 16, 0x01, 16, raw.0) };
    assert_eq!(rc, 0);
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 1,
    })
    .unwrap();
    let rb = s.read(&buf, 0, 16).unwrap();
    s.synchronize().unwrap();
    let mut want = vec![1u8; 16];
    lcg_reference(&mut want, 1);
    assert_eq!(rb.take().unwrap(), want);
}

#[test]
fn borrowed_stream_and_event_are_never_destroyed_by_xstream() {
    if !common::in_sim_process() {
        return;
    }
    let lib = vendor();
    let create_stream: Create = sym(&lib, b"aclrtCreateStream\0");
    let destroy_stream: Destroy = sym(&lib, b"aclrtDestroyStream\0");
    let create_event: Create = sym(&lib, b"aclrtCreateEvent\0");
    let destroy_event: Destroy = sym(&lib, b"aclrtDestroyEvent\0");
    let record: Record = sym(&lib, b"aclrtRecordEvent\0");
    let d = common::device(0);
    d.bind().unwrap();
    let (mut rs, mut re) = (null_mut(), null_mut());
    // SAFETY: out-pointers to locals; the device's context is current.
    unsafe {
        assert_eq!(create_stream(&mut rs), 0);
        assert_eq!(create_event(&mut re), 0);
    }
    let buf = d.alloc(8).unwrap();
    let z = d.default_stream().unwrap();
    z.memset(&buf, 0, 8, 0).unwrap();
    z.synchronize().unwrap();
    {
        // SAFETY: `rs` is a live stream of device 0's context, destroyed only below.
        let vs = unsafe { <AscendStream as Stream>::borrow_raw(&d, RawStream(rs)) }.unwrap();
        // SAFETY: `re` is a live `aclrtCreateEvent` event (TIME_LINE) of that context.
        let ve = unsafe { AscendEvent::borrow_raw(&d, RawEvent(re), 0x8) }.unwrap();
        // SAFETY: a NULL handle is refused before any use.
        let null = unsafe { AscendEvent::borrow_raw(&d, RawEvent(null_mut()), 0) };
        assert!(matches!(null, Err(Error::InvalidArgument(_))));
        // Delay and memset on the borrowed stream, a vendor record after them; an xstream
        // stream waits on the borrowed event, then runs an LCG: in order the result is
        // lcg(0x02 bytes), without the wait it would be plain 0x02 bytes.
        vs.launch_builtin(Kernel::Delay(Duration::from_millis(20)))
            .unwrap();
        vs.memset(&buf, 0, 8, 0x02).unwrap();
        d.bind().unwrap();
        // SAFETY: live event and stream of the current context.
        assert_eq!(unsafe { record(re, rs) }, 0);
        let s = d.create_stream(&StreamDesc::new()).unwrap();
        s.wait_event(&ve).unwrap();
        s.launch_builtin(Kernel::Lcg {
            buf: &buf,
            rounds: 1,
        })
        .unwrap();
        let rb = s.read(&buf, 0, 8).unwrap();
        s.synchronize().unwrap();
        let mut want = vec![2u8; 8];
        lcg_reference(&mut want, 1);
        assert_eq!(rb.take().unwrap(), want);
        ve.synchronize().unwrap();
        assert_eq!(vs.as_raw().0, rs);
        assert_eq!(ve.as_raw().0, re);
    }
    // The wrappers are gone; the handles still work and their owner destroys them.
    d.bind().unwrap();
    // SAFETY: live handles of the current context, destroyed exactly once here.
    unsafe {
        assert_eq!(record(re, rs), 0);
        assert_eq!(destroy_event(re), 0);
        assert_eq!(destroy_stream(rs), 0);
    }
}
