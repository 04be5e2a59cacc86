//! The op × dtype cases of the collective checks: deterministic inputs per rank, the expected
//! results computed independently of any backend, and the comparison (exact for integers,
//! within a tolerance for floats).

use half::{bf16, f16};
use xstream_core::{CollectiveKind, DataType, ReduceOp};

/// One operation to run and verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// Which operation.
    pub kind: CollectiveKind,
    /// The element type.
    pub dtype: DataType,
    /// The reduction (reducing kinds only).
    pub op: Option<ReduceOp>,
    /// The count argument (`send_count` for all_gather, `recv_count` for reduce_scatter).
    pub count: usize,
    /// The root (broadcast, reduce).
    pub root: usize,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} x {}", self.kind, self.count, self.dtype)?;
        if let Some(op) = self.op {
            write!(f, " {op}")?;
        }
        if matches!(
            self.kind,
            CollectiveKind::Broadcast | CollectiveKind::Reduce
        ) {
            write!(f, " root {}", self.root)?;
        }
        Ok(())
    }
}

/// An odd element count, so no operation is a multiple of a vector width.
pub const CASE_COUNT: usize = 1031;

/// Every collective × dtype × reduction (send/recv excluded), roots on the last rank.
pub fn all_cases(world: usize) -> Vec<Case> {
    let mut v = Vec::new();
    for kind in CollectiveKind::COLLECTIVES {
        for dtype in DataType::ALL {
            let ops: Vec<Option<ReduceOp>> = if kind.has_reduction() {
                ReduceOp::ALL.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for op in ops {
                v.push(Case {
                    kind,
                    dtype,
                    op,
                    count: CASE_COUNT,
                    root: world - 1,
                });
            }
        }
    }
    v
}

/// The value rank `rank` contributes at element `i` (small, exactly representable in every
/// dtype; products stay small).
pub fn value(dtype: DataType, op: Option<ReduceOp>, rank: usize, i: usize) -> f64 {
    let prod = op == Some(ReduceOp::Prod);
    match (dtype.is_float(), prod) {
        (true, true) => 0.5 * (1 + (i + rank) % 4) as f64,
        (true, false) => 0.25 * (1 + (i * 7 + rank * 3) % 16) as f64,
        (false, true) => (1 + (i + rank) % 2) as f64,
        (false, false) => {
            let v = ((i * 7 + rank * 3) % 10) as f64;
            if matches!(dtype, DataType::U8) {
                v
            } else {
                v - 4.0
            }
        }
    }
}

/// Encodes values as `dtype` (little-endian).
pub fn encode(dtype: DataType, vals: impl IntoIterator<Item = f64>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in vals {
        match dtype {
            DataType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DataType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            DataType::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
            DataType::BF16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
            DataType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DataType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            DataType::U8 => out.push(v as u8),
        }
    }
    out
}

/// Decodes `dtype` elements.
pub fn decode(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(dtype.size_of())
        .map(|c| match dtype {
            DataType::F32 => f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default())),
            DataType::F64 => f64::from_le_bytes(c.try_into().unwrap_or_default()),
            DataType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DataType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            DataType::I32 => f64::from(i32::from_le_bytes(c.try_into().unwrap_or_default())),
            DataType::I64 => i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64,
            DataType::U8 => f64::from(c[0]),
        })
        .collect()
}

/// Wraps an exact integer result to the dtype's width (like the vendors' integer kernels).
fn wrap(dtype: DataType, v: i128) -> f64 {
    match dtype {
        DataType::I32 => v as i32 as f64,
        DataType::I64 => v as i64 as f64,
        DataType::U8 => v as u8 as f64,
        _ => v as f64,
    }
}

/// `op` over the values of every rank at one element.
fn combine(dtype: DataType, op: ReduceOp, vals: &[f64]) -> f64 {
    let n = vals.len() as f64;
    if dtype.is_float() {
        return match op {
            ReduceOp::Sum => vals.iter().sum(),
            ReduceOp::Prod => vals.iter().product(),
            ReduceOp::Max => vals.iter().copied().fold(f64::MIN, f64::max),
            ReduceOp::Min => vals.iter().copied().fold(f64::MAX, f64::min),
            ReduceOp::Avg => vals.iter().sum::<f64>() / n,
        };
    }
    let ints: Vec<i128> = vals.iter().map(|&v| v as i128).collect();
    match op {
        ReduceOp::Sum => wrap(dtype, ints.iter().sum()),
        ReduceOp::Prod => wrap(dtype, ints.iter().product()),
        ReduceOp::Max => wrap(dtype, ints.iter().copied().max().unwrap_or(0)),
        ReduceOp::Min => wrap(dtype, ints.iter().copied().min().unwrap_or(0)),
        // The wrapped sum, divided by the world size, truncated toward zero.
        ReduceOp::Avg => {
            let s = wrap(dtype, ints.iter().sum()) as i128;
            (s / vals.len() as i128) as f64
        }
    }
}

impl Case {
    /// Elements of rank `rank`'s send buffer.
    pub fn send_elems(&self, world: usize) -> usize {
        match self.kind {
            CollectiveKind::ReduceScatter => self.count * world,
            _ => self.count,
        }
    }

    /// Elements of each rank's receive buffer.
    pub fn recv_elems(&self, world: usize) -> usize {
        match self.kind {
            CollectiveKind::AllGather => self.count * world,
            _ => self.count,
        }
    }

    /// Rank `rank`'s input bytes.
    pub fn input(&self, rank: usize, world: usize) -> Vec<u8> {
        let n = self.send_elems(world);
        encode(
            self.dtype,
            (0..n).map(|i| value(self.dtype, self.op, rank, i)),
        )
    }

    /// What rank `rank`'s receive buffer must hold afterwards (`None`: not written).
    pub fn expected(&self, rank: usize, world: usize) -> Option<Vec<f64>> {
        let v = |r: usize, i: usize| value(self.dtype, self.op, r, i);
        let reduce_at = |i: usize| {
            let vals: Vec<f64> = (0..world).map(|r| v(r, i)).collect();
            combine(self.dtype, self.op.unwrap_or(ReduceOp::Sum), &vals)
        };
        let c = self.count;
        match self.kind {
            CollectiveKind::AllReduce => Some((0..c).map(reduce_at).collect()),
            CollectiveKind::Reduce if rank == self.root => Some((0..c).map(reduce_at).collect()),
            CollectiveKind::Reduce => None,
            CollectiveKind::ReduceScatter => {
                Some((0..c).map(|i| reduce_at(rank * c + i)).collect())
            }
            CollectiveKind::AllGather => Some(
                (0..world)
                    .flat_map(|r| (0..c).map(move |i| (r, i)))
                    .map(|(r, i)| v(r, i))
                    .collect(),
            ),
            CollectiveKind::Broadcast => Some((0..c).map(|i| v(self.root, i)).collect()),
            CollectiveKind::Send | CollectiveKind::Recv => None,
        }
    }
}

/// The relative tolerance for `dtype` after combining `world` values.
pub fn tolerance(dtype: DataType, world: usize) -> f64 {
    let eps = match dtype {
        DataType::F16 => 2f64.powi(-10),
        DataType::BF16 => 2f64.powi(-7),
        DataType::F32 => 2f64.powi(-23),
        DataType::F64 => 2f64.powi(-52),
        _ => 0.0,
    };
    eps * 2.0 * world.max(1) as f64
}

/// Compares `got` (bytes) with `want`: exact for integers, within [`tolerance`] for floats.
///
/// # Errors
/// The first differing element, with both values.
pub fn compare(dtype: DataType, world: usize, got: &[u8], want: &[f64]) -> Result<(), String> {
    let got = decode(dtype, got);
    if got.len() < want.len() {
        return Err(format!(
            "{} elements read, {} expected",
            got.len(),
            want.len()
        ));
    }
    let tol = tolerance(dtype, world);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if dtype.is_float() {
            (g - w).abs() <= tol * w.abs().max(1.0)
        } else {
            g == w
        };
        if !ok {
            return Err(format!("element {i}: got {g}, expected {w}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_is_exact_and_wraps() {
        // u8 products of eight ranks of 2 wrap to 0.
        assert_eq!(combine(DataType::U8, ReduceOp::Prod, &[2.0; 8]), 0.0);
        assert_eq!(combine(DataType::I32, ReduceOp::Avg, &[-3.0, 0.0]), -1.0);
        assert_eq!(combine(DataType::F32, ReduceOp::Max, &[-3.0, -1.0]), -1.0);
        let c = Case {
            kind: CollectiveKind::AllGather,
            dtype: DataType::I32,
            op: None,
            count: 2,
            root: 0,
        };
        assert_eq!(c.expected(0, 2).unwrap(), vec![-4.0, 3.0, -1.0, -4.0]);
        assert!(compare(DataType::BF16, 2, &encode(DataType::BF16, [1.0]), &[1.001]).is_ok());
        assert!(compare(DataType::I32, 2, &encode(DataType::I32, [1.0]), &[2.0]).is_err());
        assert!(compare(DataType::F32, 2, &encode(DataType::F32, [1.0]), &[1.01]).is_err());
    }
}
