//! The value types of collectives: reductions, element types, operation kinds, unique ids.

use std::fmt;

use crate::{Error, Result};

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Average: the sum divided by the world size (integers: truncated toward zero).
    Avg,
}

impl ReduceOp {
    /// Every reduction, in declaration order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    /// Its lower-case name (`"sum"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// Parses a name of [`ReduceOp::name`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the names.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(format!("unknown reduction {s:?} (sum|prod|max|min|avg)"))
            })
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element type of collective buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE binary64.
    F64,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
}

impl DataType {
    /// Every element type, in declaration order.
    pub const ALL: [DataType; 7] = [
        DataType::F32,
        DataType::F16,
        DataType::BF16,
        DataType::F64,
        DataType::I32,
        DataType::I64,
        DataType::U8,
    ];

    /// Bytes per element.
    pub fn size_of(&self) -> usize {
        match self {
            DataType::F16 | DataType::BF16 => 2,
            DataType::F32 | DataType::I32 => 4,
            DataType::F64 | DataType::I64 => 8,
            DataType::U8 => 1,
        }
    }

    /// Its lower-case name (`"f32"`, `"bf16"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            DataType::F32 => "f32",
            DataType::F16 => "f16",
            DataType::BF16 => "bf16",
            DataType::F64 => "f64",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(&self) -> bool {
        matches!(
            self,
            DataType::F32 | DataType::F16 | DataType::BF16 | DataType::F64
        )
    }

    /// Parses a name of [`DataType::name`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the names.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown data type {s:?} (f32|f16|bf16|f64|i32|i64|u8)"
                ))
            })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which collective operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    /// [`Communicator::all_reduce`](super::Communicator::all_reduce).
    AllReduce,
    /// [`Communicator::all_gather`](super::Communicator::all_gather).
    AllGather,
    /// [`Communicator::reduce_scatter`](super::Communicator::reduce_scatter).
    ReduceScatter,
    /// [`Communicator::broadcast`](super::Communicator::broadcast).
    Broadcast,
    /// [`Communicator::reduce`](super::Communicator::reduce).
    Reduce,
    /// [`Communicator::send`](super::Communicator::send).
    Send,
    /// [`Communicator::recv`](super::Communicator::recv).
    Recv,
}

impl CollectiveKind {
    /// The collective operations (send and receive excluded).
    pub const COLLECTIVES: [CollectiveKind; 5] = [
        CollectiveKind::AllReduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::Broadcast,
        CollectiveKind::Reduce,
    ];

    /// Its snake-case name (`"all_reduce"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::Send => "send",
            CollectiveKind::Recv => "recv",
        }
    }

    /// Parses a name of [`CollectiveKind::name`] (`-` accepted for `_`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the names.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.replace('-', "_");
        [Self::COLLECTIVES.as_slice(), &[Self::Send, Self::Recv]]
            .concat()
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(&s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown collective {s:?} (all_reduce|all_gather|reduce_scatter|broadcast|reduce|send|recv)"
                ))
            })
    }

    /// Whether it takes a [`ReduceOp`].
    pub fn has_reduction(&self) -> bool {
        matches!(
            self,
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter | CollectiveKind::Reduce
        )
    }

    /// The bus-bandwidth factor of nccl-tests for `world` ranks: the algorithm bandwidth
    /// times this factor is the bandwidth each link sees (all_reduce `2(n-1)/n`,
    /// all_gather and reduce_scatter `(n-1)/n`, the others 1).
    pub fn bus_factor(&self, world: usize) -> f64 {
        let n = world.max(1) as f64;
        match self {
            CollectiveKind::AllReduce => 2.0 * (n - 1.0) / n,
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => (n - 1.0) / n,
            _ => 1.0,
        }
    }
}

impl fmt::Display for CollectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Opaque bytes that identify a job, made by rank 0 and exchanged out of band (NCCL: 128
/// bytes; HCCL root info: 4108 bytes).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct UniqueId(Vec<u8>);

impl UniqueId {
    /// Wraps bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<Self> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Err(Error::invalid("a unique id cannot be empty"));
        }
        Ok(Self(bytes))
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its bytes as lower-case hexadecimal (two digits per byte).
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            s.push(DIGITS[usize::from(b >> 4)] as char);
            s.push(DIGITS[usize::from(b & 15)] as char);
        }
        s
    }

    /// Parses [`UniqueId::to_hex`]'s form (either case; surrounding white space ignored).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an odd length, a non-hex digit or no digits.
    pub fn from_hex(hex: &str) -> Result<Self> {
        let hex = hex.trim();
        if !hex.len().is_multiple_of(2) {
            return Err(Error::invalid(format!(
                "a hex unique id has an even number of digits, got {}",
                hex.len()
            )));
        }
        let digit = |c: u8| -> Result<u8> {
            (c as char)
                .to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| Error::invalid(format!("{:?} is not a hex digit", c as char)))
        };
        let bytes = hex
            .as_bytes()
            .chunks(2)
            .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
            .collect::<Result<Vec<u8>>>()?;
        Self::from_bytes(bytes)
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.to_hex();
        let shown = &hex[..hex.len().min(16)];
        write!(f, "UniqueId({} bytes, {shown}..)", self.0.len())
    }
}
