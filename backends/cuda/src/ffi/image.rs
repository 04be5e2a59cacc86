//! The check that makes loading a CUDA binary safe: `cuModuleLoadData` finds the end of a
//! cubin or fatbin from its headers, so bytes whose headers point past the end of the slice
//! would make the driver read outside it. [`CheckedImage::new`] accepts only images whose
//! headers describe bytes inside them, and keeps an 8-byte-aligned copy for the driver.
//!
//! Formats (public descriptions: the ELF-64 object file format; the CUDA fat binary header
//! as documented in the CUDA toolkit's `fatbinary_section.h`):
//! - cubin: ELF-64 little-endian (`\x7fELF`, class 2, data 1); the program and section
//!   header tables and every section with file contents must lie inside the bytes.
//! - fatbin: magic `0xBA55ED50` (little-endian `u32`), `u16` version, `u16` header size,
//!   `u64` size of the entries after the header; header plus entries must lie inside.

use std::ffi::c_void;

/// An 8-byte-aligned copy of a cubin or fatbin whose headers point only inside it.
pub(crate) struct CheckedImage {
    words: Vec<u64>,
}

/// The fat binary magic.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// `SHT_NOBITS`: a section without file contents.
const SHT_NOBITS: u64 = 8;

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}
fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(
        b.get(at..at + 4)?.try_into().ok()?,
    )))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Whether `off + n * size` bytes fit in `len`.
fn inside(len: usize, off: u64, n: u64, size: u64) -> bool {
    n.checked_mul(size)
        .and_then(|t| t.checked_add(off))
        .is_some_and(|end| end <= len as u64)
}

fn check_elf(b: &[u8]) -> Result<(), String> {
    if b.len() < 64 || b[4] != 2 || b[5] != 1 {
        return Err("not a 64-bit little-endian ELF image (cubin)".into());
    }
    let bad = || "cubin header truncated".to_string();
    let phoff = u64_at(b, 0x20).ok_or_else(bad)?;
    let shoff = u64_at(b, 0x28).ok_or_else(bad)?;
    let phentsize = u16_at(b, 0x36).ok_or_else(bad)?;
    let phnum = u16_at(b, 0x38).ok_or_else(bad)?;
    let shentsize = u16_at(b, 0x3A).ok_or_else(bad)?;
    let shnum = u16_at(b, 0x3C).ok_or_else(bad)?;
    if phnum > 0 && !inside(b.len(), phoff, phnum, phentsize) {
        return Err("cubin program headers lie outside the image".into());
    }
    if shnum > 0 {
        if shentsize < 0x28 || !inside(b.len(), shoff, shnum, shentsize) {
            return Err("cubin section headers lie outside the image".into());
        }
        for i in 0..shnum {
            let h = (shoff + i * shentsize) as usize;
            let ty = u32_at(b, h + 4).ok_or_else(bad)?;
            let off = u64_at(b, h + 0x18).ok_or_else(bad)?;
            let size = u64_at(b, h + 0x20).ok_or_else(bad)?;
            if ty != SHT_NOBITS && !inside(b.len(), off, 1, size) {
                return Err(format!("cubin section {i} lies outside the image"));
            }
        }
    }
    Ok(())
}

fn check_fatbin(b: &[u8]) -> Result<(), String> {
    let bad = || "fatbin header truncated".to_string();
    let header = u16_at(b, 6).ok_or_else(bad)?;
    let body = u64_at(b, 8).ok_or_else(bad)?;
    if header < 16 || !inside(b.len(), header, 1, body) {
        return Err(format!(
            "fatbin header says {header} + {body} bytes, the image has {}",
            b.len()
        ));
    }
    Ok(())
}

impl CheckedImage {
    /// Checks `bytes` (a cubin or a fatbin) and copies them.
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub(crate) fn new(bytes: &[u8]) -> Result<Self, String> {
        if bytes.starts_with(b"\x7fELF") {
            check_elf(bytes)?;
        } else if u32_at(bytes, 0) == Some(u64::from(FATBIN_MAGIC)) {
            check_fatbin(bytes)?;
        } else if bytes.iter().take(256).any(|&c| c == b'.') && bytes.is_ascii() {
            return Err("these bytes look like PTX text: load them with ModuleSource::Ptx".into());
        } else {
            return Err(format!(
                "not a cubin (ELF magic) or fatbin (magic {FATBIN_MAGIC:#x}) image ({} bytes)",
                bytes.len()
            ));
        }
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (w, c) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut a = [0u8; 8];
            a[..c.len()].copy_from_slice(c);
            *w = u64::from_ne_bytes(a);
        }
        Ok(Self { words })
    }

    pub(crate) fn as_ptr(&self) -> *const c_void {
        self.words.as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(shnum: u16, sec_off: u64, sec_size: u64) -> Vec<u8> {
        let mut b = vec![0u8; 0x40 + 0x40 * 2];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&0x40u64.to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&0x40u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        let h = 0x40 + 0x40;
        b[h + 4..h + 8].copy_from_slice(&1u32.to_le_bytes());
        b[h + 0x18..h + 0x20].copy_from_slice(&sec_off.to_le_bytes());
        b[h + 0x20..h + 0x28].copy_from_slice(&sec_size.to_le_bytes());
        b
    }

    #[test]
    fn elf_headers_must_stay_inside() {
        CheckedImage::new(&elf(2, 0, 64)).unwrap();
        let e = CheckedImage::new(&elf(2, 0, 1 << 20)).err().unwrap();
        assert!(e.contains("section 1"), "{e}");
        let e = CheckedImage::new(&elf(200, 0, 1)).err().unwrap();
        assert!(e.contains("section headers"), "{e}");
        assert!(CheckedImage::new(b"\x7fELF\x01").is_err());
    }

    #[test]
    fn fatbin_size_must_fit() {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        b[6..8].copy_from_slice(&16u16.to_le_bytes());
        b[8..16].copy_from_slice(&48u64.to_le_bytes());
        let img = CheckedImage::new(&b).unwrap();
        assert!(!img.as_ptr().is_null());
        b[8..16].copy_from_slice(&49u64.to_le_bytes());
        assert!(CheckedImage::new(&b)
            .err()
            .unwrap()
            .contains("fatbin header"));
    }

    #[test]
    fn random_headers_never_panic_and_accepted_ones_fit() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut accepted = 0;
        for i in 0..20_000 {
            let len = (next() % 512) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Small header values, so that some images are accepted.
            for at in [0x20, 0x28, 8] {
                if let Some(s) = b.get_mut(at..at + 8) {
                    s.copy_from_slice(&(next() % 600).to_le_bytes());
                }
            }
            if i % 2 == 0 && b.len() >= 6 {
                b[..6].copy_from_slice(b"\x7fELF\x02\x01");
            } else if b.len() >= 8 {
                b[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
                b[6..8].copy_from_slice(&16u16.to_le_bytes());
            }
            if CheckedImage::new(&b).is_ok() {
                accepted += 1;
                if b.starts_with(b"\x7fELF") {
                    let shoff = u64_at(&b, 0x28).unwrap();
                    let n = u16_at(&b, 0x3C).unwrap();
                    let sz = u16_at(&b, 0x3A).unwrap();
                    assert!(n == 0 || shoff + n * sz <= b.len() as u64);
                } else {
                    assert!(16 + u64_at(&b, 8).unwrap() <= b.len() as u64);
                }
            }
        }
        assert!(
            accepted > 0,
            "no random image passed: the generator is too strict"
        );
    }

    #[test]
    fn other_bytes_are_refused() {
        let e = CheckedImage::new(b".version 8.0\n.target sm_90\n")
            .err()
            .unwrap();
        assert!(e.contains("ModuleSource::Ptx"), "{e}");
        assert!(CheckedImage::new(&[1, 2, 3])
            .err()
            .unwrap()
            .contains("not a cubin"));
        assert!(CheckedImage::new(&[]).is_err());
    }
}
