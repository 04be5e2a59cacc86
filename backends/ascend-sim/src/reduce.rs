//! `aclrtReduceAsync`: the runtime's built-in reduce task (no kernel binary), as the CANN
//! runtime's source shows it (hicann/runtime; the files are listed in section
//! "ACL: aclrtReduceAsync" of `docs/simulators-acl-tasks.md`).
//!
//! `aclError aclrtReduceAsync(void* dst, const void* src, uint64_t count, aclrtReduceKind kind,
//! aclDataType type, aclrtStream stream, void* reserve)` enqueues, for each element of `type`
//! in the `count` **bytes**, `dst[i] = kind(dst[i], src[i])`. The checks, in the runtime's order:
//!
//! 1. ACL layer: `dst` NULL, `src` NULL, `reserve` not NULL → 100000; `type` outside the ten the
//!    layer maps (`FLOAT`, `FLOAT16`, `INT16`, `INT4`, `INT8`, `INT32`, `BF16`, `UINT8`,
//!    `UINT16`, `UINT32`) → 100000.
//! 2. Runtime layer: a non-NULL stream handle is validated first (an unknown handle → 100000, as
//!    everywhere in this simulator). Then `count == 0` → 107000; a `kind` outside `[10, 14)` →
//!    107000; on products whose reduce goes through the runtime's "V2" task (Atlas training
//!    products, `XSIM_PRODUCT=910`, and Atlas inference products, `310p`) any kind but SUM →
//!    107000; `count > 4 GiB` with SUM (V2: any kind) → 107000.
//! 3. The current context (none → 107002), the stream of another context → 107003, the
//!    default stream inside a capture → the capture rule of every task.
//! 4. The product's capability: a kind the product lacks → 207000 (MAX / MIN on 310P; EQUAL on
//!    the non-STARS products 910 and 310P); a type the product lacks → 207000 (A2/A3: int8,
//!    int16, int32, fp16, fp32, bf16; 310P: fp32, fp16, int16; 910: fp32).
//! 5. Alignment: `src`, then `dst`, must be 2-byte aligned for 16-bit types and 4-byte aligned
//!    for 32-bit types → 107008 (`ACL_ERROR_RT_ADDR_UNALIGNED`).
//!
//! The runtime does not check `count` against the element size; the simulator combines the
//! whole elements and leaves a trailing partial element untouched. EQUAL passes the runtime's
//! checks on A2 but its element semantics are a hardware (SDMA) matter not visible in the
//! source: the simulator refuses it with 207000 rather than invent a result. Integer sums wrap;
//! floating-point sums are one addition per element (fp16 / bf16 through `f32`, rounded to
//! nearest even). The task is captured into a model run instance like every stream task.

use crate::codes::*;
use crate::config::{product, Product};
use crate::elementwise::{self, apply, Kind};
use crate::error::*;
use crate::stream::*;
use crate::task::*;
use std::ffi::c_void;
use std::sync::Arc;

/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM: u32 = 10;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: u32 = 11;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: u32 = 12;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL: u32 = 13;
/// `ACL_ERROR_RT_ADDR_UNALIGNED`.
pub const ACL_ERROR_RT_ADDR_UNALIGNED: i32 = 107_008;
/// The runtime's largest reduce (`MAX_MEMCPY_SIZE_OF_D2D`, 4 GiB).
pub const MAX_REDUCE_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// The element types, by their `aclDataType` value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    F32,
    F16,
    I8,
    I32,
    U8,
    I16,
    U16,
    U32,
    Bf16,
    I4,
}

fn ty_of(acl: i32) -> Option<Ty> {
    Some(match acl {
        0 => Ty::F32,
        1 => Ty::F16,
        2 => Ty::I8,
        3 => Ty::I32,
        4 => Ty::U8,
        6 => Ty::I16,
        7 => Ty::U16,
        8 => Ty::U32,
        27 => Ty::Bf16,
        29 => Ty::I4,
        _ => return None,
    })
}

/// The arithmetic's element type of an ACL type (int4 pairs are combined as bytes: it is
/// refused by every product before any arithmetic).
fn elem(t: Ty) -> elementwise::Ty {
    use elementwise::Ty as E;
    match t {
        Ty::F32 => E::F32,
        Ty::F16 => E::F16,
        Ty::I8 => E::I8,
        Ty::I32 => E::I32,
        Ty::U8 | Ty::I4 => E::U8,
        Ty::I16 => E::I16,
        Ty::U16 => E::U16,
        Ty::U32 => E::U32,
        Ty::Bf16 => E::Bf16,
    }
}

/// Whether the product's reduce goes through the runtime's "V2" task (SUM only).
fn v2_path(p: Product) -> bool {
    matches!(p, Product::T910 | Product::P310)
}

fn product_has_type(p: Product, t: Ty) -> bool {
    match p {
        Product::A2 => matches!(t, Ty::I8 | Ty::I16 | Ty::I32 | Ty::F16 | Ty::F32 | Ty::Bf16),
        Product::P310 => matches!(t, Ty::F32 | Ty::F16 | Ty::I16),
        Product::T910 => t == Ty::F32,
    }
}

fn product_has_kind(p: Product, kind: u32) -> bool {
    match p {
        // Reached only with SUM (the V2 checks refuse the others first); 310P's kind mask
        // also lacks MAX and MIN, and neither product is a STARS platform (no EQUAL).
        Product::P310 | Product::T910 => kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
        Product::A2 => true,
    }
}

struct ReduceTask {
    dst: usize,
    src: usize,
    count: usize,
    kind: u32,
    ty: Ty,
}

impl ExtTask for ReduceTask {
    fn run(&self, _stream: &Stream, _epoch: u64) {
        let n = self.count - self.count % elem(self.ty).size();
        // The source is read into a copy first, so identical or overlapping ranges never alias
        // the destination slice.
        // SAFETY: the caller of aclrtReduceAsync promised both ranges stay valid until the task
        // ran.
        let src = unsafe { std::slice::from_raw_parts(self.src as *const u8, n) }.to_vec();
        // SAFETY: as above; no other slice of this range lives while this one does.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.dst as *mut u8, n) };
        let kind = match self.kind {
            ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM => Kind::Add,
            ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX => Kind::Max,
            _ => Kind::Min,
        };
        apply(dst, &src, elem(self.ty), kind);
    }
}

fn reduce(
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    kind: u32,
    type_: i32,
    stream: *mut c_void,
    reserve: *mut c_void,
) -> R {
    // 1. The ACL layer.
    non_null(dst, "dst")?;
    non_null(src, "src")?;
    if !reserve.is_null() {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "reserve is a reserved parameter and must be NULL",
        );
    }
    let Some(ty) = ty_of(type_) else {
        return err(
            ACL_ERROR_INVALID_PARAM,
            format!("data type {type_} is not supported by aclrtReduceAsync"),
        );
    };
    // 2. The runtime layer: the stream object, then the arguments.
    if !stream.is_null() {
        crate::registry::stream_of(stream)?;
    }
    let p = product();
    if count == 0 {
        return err(ACL_ERROR_RT_PARAM_INVALID, "count must not be 0");
    }
    if v2_path(p) {
        if kind != ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("kind {kind}: this product reduces with SUM (10) only"),
            );
        }
        if count > MAX_REDUCE_BYTES {
            return err(ACL_ERROR_RT_PARAM_INVALID, "count exceeds 4 GiB");
        }
    } else {
        if !(ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM..14).contains(&kind) {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("kind {kind} outside [10, 14)"),
            );
        }
        if kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM && count > MAX_REDUCE_BYTES {
            return err(ACL_ERROR_RT_PARAM_INVALID, "count exceeds 4 GiB with SUM");
        }
    }
    // 3. Context and stream.
    let s = enqueue_stream(stream)?;
    // 4. The product's capability.
    if !product_has_kind(p, kind) {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            format!("reduce kind {kind} is not supported on this product"),
        );
    }
    if kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "reduce kind EQUAL (13) is not modelled by the simulator",
        );
    }
    if !product_has_type(p, ty) {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            format!("data type {type_} is not supported for reduce on this product"),
        );
    }
    // 5. Alignment, source first.
    let align = match elem(ty).size() {
        4 => 4,
        2 => 2,
        _ => 1,
    };
    for (what, addr) in [("src", src as usize), ("dst", dst as usize)] {
        if !addr.is_multiple_of(align) {
            return err(
                ACL_ERROR_RT_ADDR_UNALIGNED,
                format!("{what} is not {align}-byte aligned"),
            );
        }
    }
    let count = usize::try_from(count).map_err(|_| AclErr {
        code: ACL_ERROR_RT_PARAM_INVALID,
        msg: "count exceeds the address space".into(),
    })?;
    s.push(Task::Ext(Arc::new(ReduceTask {
        dst: dst as usize,
        src: src as usize,
        count,
        kind,
        ty,
    })))
}

/// `aclError aclrtReduceAsync(void* dst, const void* src, uint64_t count, aclrtReduceKind
/// kind, aclDataType type, aclrtStream stream, void* reserve)`: see the module documentation.
///
/// # Safety
/// `dst` and `src` must each point to `count` valid bytes until the task has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtReduceAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    kind: u32,
    type_: i32,
    stream: *mut c_void,
    reserve: *mut c_void,
) -> i32 {
    ffi("aclrtReduceAsync", true, || {
        reduce(dst, src, count, kind, type_, stream, reserve)
    })
}
