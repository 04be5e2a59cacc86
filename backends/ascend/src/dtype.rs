//! xstream's element types as ACL `aclDataType` values (`acl/acl_base_rt.h`), checked against
//! the runtime's own sizes (`aclDataTypeSize`) when it exports that call.

use xstream_core::DataType;

use crate::sys::AclFns;

/// The `aclDataType` of an xstream element type: `ACL_FLOAT` 0, `ACL_FLOAT16` 1, `ACL_BF16`
/// 27, `ACL_DOUBLE` 11, `ACL_INT32` 3, `ACL_INT64` 9, `ACL_UINT8` 4.
pub fn acl_data_type(d: DataType) -> i32 {
    match d {
        DataType::F32 => 0,
        DataType::F16 => 1,
        DataType::BF16 => 27,
        DataType::F64 => 11,
        DataType::I32 => 3,
        DataType::I64 => 9,
        DataType::U8 => 4,
    }
}

/// A type whose element size the runtime reports differently from xstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeMismatch {
    /// The xstream type.
    pub dtype: DataType,
    /// Its `aclDataType` value ([`acl_data_type`]).
    pub acl_type: i32,
    /// [`DataType::size_of`].
    pub xstream: usize,
    /// `aclDataTypeSize` of `acl_type`.
    pub runtime: usize,
}

/// Every type whose size `aclDataTypeSize` reports differently from [`DataType::size_of`]
/// (empty when the table agrees, or when the runtime does not export the call).
pub fn mismatches(t: &AclFns) -> Vec<SizeMismatch> {
    DataType::ALL
        .iter()
        .filter_map(|&dtype| {
            let acl_type = acl_data_type(dtype);
            let runtime = crate::result::sysinfo::data_type_size(t, acl_type)?;
            (runtime != dtype.size_of()).then_some(SizeMismatch {
                dtype,
                acl_type,
                xstream: dtype.size_of(),
                runtime,
            })
        })
        .collect()
}
