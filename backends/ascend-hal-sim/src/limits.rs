//! The id spaces the driver hands out (`halResourceIdAlloc` / `halResourceIdFree`) and their
//! sizes for the emulated Ascend 910B4, with the refusal a driver gives when one is used up.
//!
//! Sizes, from the runtime's own tables for this chip (`hicann/runtime`,
//! `src/runtime/config/910_B_93/dev_info_reg.cc`, `src/runtime/core/inc/spec/base_info.hpp`):
//!
//! | id space | ids handed out | source | refusal |
//! | --- | --- | --- | --- |
//! | streams (`DRV_STREAM_ID`) | 0 ..= 2037 | `maxPhysicalStreamNum = 2038`; ids from `baseAicpuStreamId = 2048` up are the runtime's AI CPU streams | `DRV_ERROR_NO_STREAM_RESOURCES` |
//! | events (`DRV_EVENT_ID`) | 0 ..= 65535 | `MAX_EVENT_ID_NUM = 65536`, `stubEventCount = 65536` | `DRV_ERROR_NO_EVENT_RESOURCES` |
//! | notifies (`DRV_NOTIFY_ID`) | 0 ..= 65535 | no count for this chip in the runtime; 16-bit ids | `DRV_ERROR_NO_NOTIFY_RESOURCES` |
//! | models (`DRV_MODEL_ID`) | 0 ..= 65535 | no count for this chip in the runtime; 16-bit ids | `DRV_ERROR_NO_MODEL_RESOURCES` |
//! | other types | 0 ..= 65535 | 16-bit ids | `DRV_ERROR_NO_RESOURCES` |
//!
//! The runtime maps these driver codes to `ACL_ERROR_RT_NO_STREAM_RESOURCE` (207008),
//! `ACL_ERROR_RT_NO_EVENT_RESOURCE` (207007), … (`errcode_manage.cc`). Live submission queues
//! are capped at [`SQ_LIMIT`] (each stream owns one), refused with `DRV_ERROR_NO_RESOURCES`.
//!
//! `halResourceInfoQuery` answers each space's capacity and the ids in use, which the runtime
//! reads for `aclrtGetStreamAvailableNum` / `aclrtGetEventAvailNum` on this chip
//! (`RT_FEATURE_DEVICE_GET_RESOURCE_NUM_DYNAMIC`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use xstream_core::sync::lock;

use crate::codes::*;

/// `DRV_STREAM_ID` (`drvIdType_t`, `pkg_inc/driver/hal_pkg/trs_pkg.h`).
pub const DRV_STREAM_ID: u32 = 0;
/// `DRV_EVENT_ID`.
pub const DRV_EVENT_ID: u32 = 1;
/// `DRV_MODEL_ID`.
pub const DRV_MODEL_ID: u32 = 2;
/// `DRV_NOTIFY_ID`.
pub const DRV_NOTIFY_ID: u32 = 3;

/// Stream ids of the emulated chip: the runtime's `maxPhysicalStreamNum` for the 910B.
pub const STREAM_ID_LIMIT: u32 = 2038;
/// Event ids of the emulated chip: the runtime's `MAX_EVENT_ID_NUM`.
pub const EVENT_ID_LIMIT: u32 = 65_536;
/// Every other id space: 16-bit ids.
pub const OTHER_ID_LIMIT: u32 = 65_536;
/// Live submission queues: below the runtime's `baseAicpuStreamId` (2048) for the 910B, so
/// that stream ids run out first (the runtime also keeps queues of its own).
pub const SQ_LIMIT: usize = 2048;

/// How many ids of type `ty` the emulated driver hands out.
pub fn capacity(ty: u32) -> u32 {
    match ty {
        DRV_STREAM_ID => STREAM_ID_LIMIT,
        DRV_EVENT_ID => EVENT_ID_LIMIT,
        _ => OTHER_ID_LIMIT,
    }
}

/// The driver's answer when every id of type `ty` is in use.
pub fn exhausted(ty: u32) -> i32 {
    match ty {
        DRV_STREAM_ID => DRV_ERROR_NO_STREAM_RESOURCES,
        DRV_EVENT_ID => DRV_ERROR_NO_EVENT_RESOURCES,
        DRV_NOTIFY_ID => DRV_ERROR_NO_NOTIFY_RESOURCES,
        DRV_MODEL_ID => DRV_ERROR_NO_MODEL_RESOURCES,
        _ => DRV_ERROR_NO_RESOURCES,
    }
}

/// Ids in use per type, and where the next search starts.
static IDS: Mutex<BTreeMap<u32, (BTreeSet<u32>, u32)>> = Mutex::new(BTreeMap::new());

/// Hands out a free id of type `ty` (searching on from the last one handed out, so a full space
/// costs one pass), or the driver's exhaustion code.
pub fn alloc(ty: u32) -> Result<u32, i32> {
    let mut ids = lock(&IDS);
    let (used, next) = ids.entry(ty).or_default();
    let cap = capacity(ty);
    let start = (*next).min(cap);
    let id = (start..cap)
        .chain(0..start)
        .find(|i| !used.contains(i))
        .ok_or_else(|| exhausted(ty))?;
    used.insert(id);
    *next = id + 1;
    Ok(id)
}

/// Takes back id `id` of type `ty`; `false` when it was not handed out.
pub fn free(ty: u32, id: u32) -> bool {
    let mut ids = lock(&IDS);
    ids.entry(ty).or_default().0.remove(&id)
}

/// Ids of type `ty` in use now.
pub fn in_use(ty: u32) -> u32 {
    let ids = lock(&IDS);
    ids.get(&ty).map_or(0, |s| s.0.len() as u32)
}

/// The `drvResourceType_t` of `halResourceInfoQuery` as the `drvIdType_t` it counts
/// (`DRV_RESOURCE_SQ_ID` counts live submission queues: `None`).
pub fn query_type(resource: u32) -> Option<Option<u32>> {
    match resource {
        // DRV_RESOURCE_STREAM_ID, _EVENT_ID, _MODEL_ID, _NOTIFY_ID, _CMO_ID share drvIdType_t's values.
        0..=4 => Some(Some(resource)),
        // DRV_RESOURCE_SQ_ID
        5 => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_stop_below_the_ai_cpu_base_with_the_stream_code() {
        let mut got = Vec::new();
        let err = loop {
            match alloc(DRV_STREAM_ID) {
                Ok(id) => got.push(id),
                Err(e) => break e,
            }
            assert!(
                got.len() <= 2038,
                "no refusal at the 910B limit of 2038 stream ids"
            );
        };
        assert_eq!(err, DRV_ERROR_NO_STREAM_RESOURCES);
        assert_eq!(got.len(), 2038);
        assert!(
            got.iter().all(|&id| id & 2048 == 0),
            "an id with the AI CPU bit"
        );
        assert_eq!(in_use(DRV_STREAM_ID), 2038);
        assert!(free(DRV_STREAM_ID, 7));
        assert!(!free(DRV_STREAM_ID, 7), "freed twice");
        assert_eq!(
            alloc(DRV_STREAM_ID),
            Ok(7),
            "the freed id comes back when it is the only one"
        );
        for id in got {
            assert!(free(DRV_STREAM_ID, id));
        }
        assert_eq!(in_use(DRV_STREAM_ID), 0);
        assert_eq!(exhausted(DRV_EVENT_ID), DRV_ERROR_NO_EVENT_RESOURCES);
        assert_eq!(exhausted(DRV_NOTIFY_ID), DRV_ERROR_NO_NOTIFY_RESOURCES);
    }
}
