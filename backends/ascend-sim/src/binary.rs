//! The simulator's **test-only kernel binary format**, the only format its
//! `aclrtBinaryLoadFromData` accepts (simulator-only, NOT an ACL or Ascend C format). A binary
//! is a table of kernel names, each mapped to one of the simulator's built-in CPU kernels with
//! that kernel's parameter layout. Anything else, a real Ascend C kernel object included, is an
//! invalid binary: `ACL_ERROR_RT_PARAM_INVALID` (107000), the code the runtime returns when it
//! cannot register a binary.
//!
//! Layout (little-endian, no padding between fields):
//!
//! | Field | Type | Meaning |
//! | --- | --- | --- |
//! | magic | 8 bytes | `XSIMKBIN` |
//! | version | `u32` | 1 |
//! | count | `u32` | number of kernels, 1..=64 |
//! | *per kernel:* name length | `u16` | 1..=255 |
//! | name | bytes | UTF-8 without NUL, unique within the binary |
//! | builtin | `u32` | the CPU kernel: 1 delay, 2 lcg, 3 fault, 4 fill, 5 add, 6 echo |
//! | parameter count | `u8` | must equal the built-in's |
//! | parameter kinds | one `u8` each | must equal the built-in's: 1 pointer (8 bytes), 2 `u32`, 3 `u64`, 4 `i32`, 5 `i8`, 8 `u16`, 9 `i64`, 10 `f32`, 16 a 16-byte block passed by value |
//!
//! Nothing may follow the last kernel. The built-ins:
//!
//! | Id | Parameters | Runs |
//! | --- | --- | --- |
//! | 1 delay | `u64 nanoseconds` | occupies the stream that long (ends early on abort) |
//! | 2 lcg | `pointer words_ptr, u32 words, u32 rounds` | each `u32` x: `rounds` × `x = x*1664525 + 1013904223` (wrapping) |
//! | 3 fault | `i32 code` | a device fault: the context is poisoned with `code` (0: nothing) |
//! | 4 fill | `pointer words_ptr, u32 words, u32 value` | stores `value` into each of the `words` `u32`s |
//! | 5 add | `pointer a, pointer b, pointer out, u32 words` | for each `i < words`: reads `a[i]` and `b[i]`, then stores their wrapping `u32` sum to `out[i]` (the pointers may alias) |
//! | 6 echo | `pointer out, block16 s, i8 x, u16 y, i64 z, f32 w` | writes the 40-byte record of xstream's `xstream_echo_params`: `s` bytes 0..3 at 0, `s` bytes 8..16 at 8, `x` at 16, `y` at 18, `z` at 24, `w` at 32 (little-endian; other bytes untouched) |
//!
//! Arguments are laid out like the runtime lays out an AI Core kernel's: each parameter starts
//! at the next multiple of 8 bytes, and the argument block ends after the last parameter (delay
//! 8 bytes, lcg and fill 20, fault 4, add 28, echo 52).

/// The magic that opens a simulator kernel binary.
pub const XSIM_BINARY_MAGIC: [u8; 8] = *b"XSIMKBIN";
/// The format version this simulator reads.
pub const XSIM_BINARY_VERSION: u32 = 1;
/// Most kernels one binary may hold.
pub const XSIM_BINARY_MAX_KERNELS: u32 = 64;

/// Parameter kind byte: a device pointer (8 bytes).
pub const XSIM_PARAM_PTR: u8 = 1;
/// Parameter kind byte: `u32`.
pub const XSIM_PARAM_U32: u8 = 2;
/// Parameter kind byte: `u64`.
pub const XSIM_PARAM_U64: u8 = 3;
/// Parameter kind byte: `i32`.
pub const XSIM_PARAM_I32: u8 = 4;
/// Parameter kind byte: `i8`.
pub const XSIM_PARAM_I8: u8 = 5;
/// Parameter kind byte: `u16`.
pub const XSIM_PARAM_U16: u8 = 8;
/// Parameter kind byte: `i64`.
pub const XSIM_PARAM_I64: u8 = 9;
/// Parameter kind byte: `f32`.
pub const XSIM_PARAM_F32: u8 = 10;
/// Parameter kind byte: a 16-byte block passed by value (a struct).
pub const XSIM_PARAM_BLOCK16: u8 = 16;

/// The size in bytes of a parameter of kind byte `k`.
pub fn param_size(k: u8) -> usize {
    match k {
        XSIM_PARAM_I8 => 1,
        XSIM_PARAM_U16 => 2,
        XSIM_PARAM_U32 | XSIM_PARAM_I32 | XSIM_PARAM_F32 => 4,
        XSIM_PARAM_BLOCK16 => 16,
        _ => 8,
    }
}

/// A built-in CPU kernel of the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// Occupies the stream for a number of nanoseconds.
    Delay = 1,
    /// The LCG compute kernel over `u32` words.
    Lcg = 2,
    /// A device fault with a code.
    Fault = 3,
    /// Stores a `u32` value into `u32` words.
    Fill = 4,
    /// `out[i] = a[i] + b[i]` over `u32` words (the pointers may alias).
    Add = 5,
    /// Writes its arguments (scalars of several widths, a struct by value) into a record.
    Echo = 6,
}

impl Builtin {
    fn from_id(id: u32) -> Option<Self> {
        match id {
            1 => Some(Self::Delay),
            2 => Some(Self::Lcg),
            3 => Some(Self::Fault),
            4 => Some(Self::Fill),
            5 => Some(Self::Add),
            6 => Some(Self::Echo),
            _ => None,
        }
    }

    /// The parameter kinds, in order.
    pub fn params(self) -> &'static [u8] {
        match self {
            Self::Delay => &[XSIM_PARAM_U64],
            Self::Lcg | Self::Fill => &[XSIM_PARAM_PTR, XSIM_PARAM_U32, XSIM_PARAM_U32],
            Self::Fault => &[XSIM_PARAM_I32],
            Self::Add => &[
                XSIM_PARAM_PTR,
                XSIM_PARAM_PTR,
                XSIM_PARAM_PTR,
                XSIM_PARAM_U32,
            ],
            Self::Echo => &[
                XSIM_PARAM_PTR,
                XSIM_PARAM_BLOCK16,
                XSIM_PARAM_I8,
                XSIM_PARAM_U16,
                XSIM_PARAM_I64,
                XSIM_PARAM_F32,
            ],
        }
    }

    /// `(offset, size)` of each parameter in the argument block.
    pub fn layout(self) -> Vec<(usize, usize)> {
        let mut end = 0usize;
        self.params()
            .iter()
            .map(|&k| {
                let size = param_size(k);
                let off = end.next_multiple_of(8);
                end = off + size;
                (off, size)
            })
            .collect()
    }

    /// The size of the argument block.
    pub fn args_size(self) -> usize {
        self.layout().last().map_or(0, |&(o, s)| o + s)
    }
}

/// One kernel of a loaded binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDef {
    /// Its name (what `aclrtBinaryGetFunction` looks up).
    pub name: String,
    /// The CPU kernel it runs.
    pub builtin: Builtin,
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err("binary is truncated".into());
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Parses a simulator kernel binary; the error says what is wrong with it.
pub fn parse(data: &[u8]) -> Result<Vec<KernelDef>, String> {
    let mut r = Reader { b: data };
    if r.take(8).ok() != Some(&XSIM_BINARY_MAGIC[..]) {
        return Err(
            "not a simulator kernel binary (magic XSIMKBIN expected; the simulator cannot run \
             real Ascend kernel objects)"
                .into(),
        );
    }
    let version = r.u32()?;
    if version != XSIM_BINARY_VERSION {
        return Err(format!("binary format version {version} (only 1 is known)"));
    }
    let count = r.u32()?;
    if count == 0 || count > XSIM_BINARY_MAX_KERNELS {
        return Err(format!(
            "kernel count {count} outside 1..={XSIM_BINARY_MAX_KERNELS}"
        ));
    }
    let mut out: Vec<KernelDef> = Vec::new();
    for i in 0..count {
        let len = r.u16()? as usize;
        if len == 0 || len > 255 {
            return Err(format!("kernel {i}: name length {len} outside 1..=255"));
        }
        let name = std::str::from_utf8(r.take(len)?)
            .map_err(|_| format!("kernel {i}: name is not UTF-8"))?;
        if name.contains('\0') {
            return Err(format!("kernel {i}: name contains NUL"));
        }
        if out.iter().any(|k| k.name == name) {
            return Err(format!("kernel name '{name}' appears twice"));
        }
        let id = r.u32()?;
        let builtin = Builtin::from_id(id)
            .ok_or_else(|| format!("kernel '{name}': unknown built-in kernel {id}"))?;
        let n = r.u8()? as usize;
        let kinds = r.take(n)?;
        if kinds != builtin.params() {
            return Err(format!(
                "kernel '{name}': parameter kinds {kinds:?} do not match built-in {builtin:?} {:?}",
                builtin.params()
            ));
        }
        out.push(KernelDef {
            name: name.to_owned(),
            builtin,
        });
    }
    if !r.b.is_empty() {
        return Err(format!("{} bytes after the last kernel", r.b.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, id: u32, kinds: &[u8]) -> Vec<u8> {
        let mut v = (name.len() as u16).to_le_bytes().to_vec();
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.push(kinds.len() as u8);
        v.extend_from_slice(kinds);
        v
    }

    fn bin(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut v = XSIM_BINARY_MAGIC.to_vec();
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for e in entries {
            v.extend_from_slice(e);
        }
        v
    }

    #[test]
    fn layouts() {
        assert_eq!(Builtin::Delay.args_size(), 8);
        assert_eq!(Builtin::Lcg.layout(), vec![(0, 8), (8, 4), (16, 4)]);
        assert_eq!(Builtin::Lcg.args_size(), 20);
        assert_eq!(Builtin::Fault.args_size(), 4);
        assert_eq!(
            Builtin::Echo.layout(),
            vec![(0, 8), (8, 16), (24, 1), (32, 2), (40, 8), (48, 4)]
        );
        assert_eq!(Builtin::Echo.args_size(), 52);
    }

    #[test]
    fn parses_and_refuses() {
        let good = bin(&[entry("a", 1, &[3]), entry("b", 2, &[1, 2, 2])]);
        let k = parse(&good).unwrap();
        assert_eq!(k[1].name, "b");
        assert_eq!(k[1].builtin, Builtin::Lcg);
        assert!(parse(&good[..good.len() - 1]).is_err(), "truncated");
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(parse(&trailing).is_err());
        assert!(parse(b"\x7fELF....").is_err());
        assert!(parse(&bin(&[])).is_err(), "no kernels");
        assert!(parse(&bin(&[entry("a", 1, &[2])])).is_err(), "wrong kinds");
        assert!(parse(&bin(&[entry("a", 9, &[3])])).is_err(), "unknown id");
        assert!(parse(&bin(&[entry("a", 1, &[3]), entry("a", 3, &[4])])).is_err());
        let mut v2 = good;
        v2[8] = 2;
        assert!(parse(&v2).is_err(), "version");
    }
}
