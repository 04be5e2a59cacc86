//! Physical memory shared between two processes (`xstream_core::vmm_share`): the parts a
//! backend's test runs in the exporting process ([`export`], [`parent`]) and in the importing
//! one ([`child`]), the importer being the test binary started again
//! ([`crate::child::spawn_test`]). The exporter writes one pattern through its mapping; the
//! importer maps the memory at another offset of a range of its own, checks the pattern and
//! writes a second one; the exporter reads the second through its own mapping. How the handle
//! travels is the test's part ([`send_hex`] / [`recv_hex`] for handles without a descriptor).
//!
//! Functions panic on a failed check (they run inside `#[test]`s).

use std::io::{BufReader, Write};
use std::process::Child;
use std::time::Duration;

use xstream_core::{Error, PhysicalMemory, ShareableHandle, Stream, VirtualMemory, VirtualRange};

use crate::child::{finish, wait_line};

/// The line the importer prints once it wrote its pattern.
pub const WRITTEN: &str = "VMM_SHARE_WRITTEN";
/// The longest a child may take.
pub const BOUND: Duration = Duration::from_secs(60);

/// The bytes each side writes: `seed` picks the pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + i / 4096) as u8) ^ seed)
        .collect()
}

/// The exporter's memory: two granules mapped at offset 0 of a range of two granules.
#[derive(Debug)]
pub struct Exported<D: VirtualMemory> {
    /// The range.
    pub range: VirtualRange<D>,
    /// The physical memory.
    pub phys: PhysicalMemory<D>,
    /// Its export.
    pub handle: ShareableHandle,
}

fn read<D: VirtualMemory>(d: &D, range: &VirtualRange<D>, offset: usize, len: usize) -> Vec<u8> {
    let s = d.create_stream(&xstream_core::StreamDesc::new()).unwrap();
    let b = range.buffer(offset, len).unwrap();
    let r = s.read(&b, 0, len).unwrap();
    s.synchronize().unwrap();
    r.take().unwrap()
}

fn write<D: VirtualMemory>(d: &D, range: &VirtualRange<D>, offset: usize, bytes: Vec<u8>) {
    let s = d.create_stream(&xstream_core::StreamDesc::new()).unwrap();
    let b = range.buffer(offset, bytes.len()).unwrap();
    s.write(&b, 0, bytes).unwrap();
    s.synchronize().unwrap();
}

/// Creates, maps, fills (pattern 3) and exports two granules; checks the refusals an
/// exporting process sees: an import of its own export, and a handle of another backend.
pub fn export<D: VirtualMemory>(d: &D) -> Exported<D> {
    let g = d.granularity().unwrap().minimum;
    let range = d.reserve(2 * g).unwrap();
    let phys = d.create_physical(2 * g).unwrap();
    range.map(0, &phys).unwrap();
    range.set_access(0, 2 * g, d).unwrap();
    write(d, &range, 0, pattern(2 * g, 3));
    let handle = phys.export_shareable().unwrap();
    assert_eq!(handle.size(), 2 * g);
    assert_eq!(handle.device(), d.info().ordinal);
    assert_eq!(handle.backend(), d.info().backend);
    let e = d.import_physical(&handle).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("exported the memory")),
        "{e}"
    );
    // The exporter keeps using its memory after the export.
    assert!(read(d, &range, g - 8, 16) == pattern(2 * g, 3)[g - 8..g + 8]);
    Exported {
        range,
        phys,
        handle,
    }
}

/// The exporting process's side once `child` (the importer) has been started and sent the
/// handle: waits for the importer's write, checks it through the exporter's mapping, and
/// waits for the child's success.
pub fn parent<D: VirtualMemory>(d: &D, ex: &Exported<D>, mut child: Child) {
    let g = ex.phys.size() / 2;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let lines = wait_line(&mut out, WRITTEN);
    let got = lines.last().is_some_and(|l| l.contains(WRITTEN));
    if !got {
        child.stdout = Some(out.into_inner());
        let (_, text) = finish(child, BOUND);
        panic!("the importer stopped before writing: {lines:?}\n{text}");
    }
    let want = pattern(2 * g, 3)[..g].to_vec();
    assert!(
        read(d, &ex.range, 0, g) == want,
        "the first granule is still the exporter's pattern"
    );
    assert!(
        read(d, &ex.range, g, g) == pattern(g, 9),
        "the importer's write shows through the exporter's mapping"
    );
    child.stdout = Some(out.into_inner());
    let (ok, text) = finish(child, BOUND);
    assert!(ok, "importer failed:\n{text}");
}

/// The importing process's side: imports `handle`, maps it at offset one granule of a range
/// of three (another address than the exporter's), checks the exporter's pattern, writes
/// pattern 9 over the second granule, prints [`WRITTEN`].
pub fn child<D: VirtualMemory>(d: &D, handle: &ShareableHandle) {
    let g = d.granularity().unwrap().minimum;
    assert_eq!(handle.size(), 2 * g);
    let phys = d.import_physical(handle).unwrap();
    assert_eq!(phys.size(), 2 * g);
    let range = d.reserve(3 * g).unwrap();
    range.map(g, &phys).unwrap();
    range.set_access(g, 2 * g, d).unwrap();
    assert!(
        read(d, &range, g, 2 * g) == pattern(2 * g, 3),
        "the importer reads the exporter's bytes"
    );
    write(d, &range, 2 * g, pattern(g, 9));
    let mut o = std::io::stdout().lock();
    writeln!(o, "{WRITTEN}").unwrap();
    o.flush().unwrap();
}

/// Sends a handle without a descriptor to the child as a hex line on its stdin.
pub fn send_hex(child: &mut Child, handle: &ShareableHandle) {
    assert!(
        !handle.needs_fd(),
        "a handle with a descriptor needs a socket"
    );
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "{}", handle.to_hex()).unwrap();
    stdin.flush().unwrap();
}

/// Reads a handle sent by [`send_hex`].
pub fn recv_hex() -> ShareableHandle {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    ShareableHandle::from_hex(&line).unwrap()
}
