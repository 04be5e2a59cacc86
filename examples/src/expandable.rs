//! The expandable caching allocator of the `expandable` example, as a module so that the
//! example and the allocator benchmark (`benches/expandable_alloc.rs`) share it.
//!
//! [`Expandable`]: one reserved address range per stream (a segment) that grows by mapping
//! physical chunks of the device's recommended granularity at its end. Blocks are carved out
//! of the mapped part best-fit ([`Blocks`]), split, and coalesced with their free neighbours
//! when freed; freed memory is reused without unmapping. Every block is a buffer of the
//! segment ([`VirtualRange::buffer`]). A block another stream used is freed with an event
//! recorded on that stream (no host wait), and the segment's stream waits for the event
//! before it hands the memory out again.
//!
//! The hot path (a request a free block holds): a best-fit lookup in an ordered set, a split,
//! the buffer of the block; a free: the coalescing with both neighbours.

use std::collections::{BTreeMap, BTreeSet};

use xstream::{
    Backend, BufferOf, Error, EventOf, Result, Stream, StreamOf, VirtualMemory, VirtualRange,
};

/// Address space reserved per segment.
pub const SEGMENT: usize = 1 << 30;
/// Rounding of every request.
pub const ROUND: usize = 512;

/// A request's size rounded up to [`ROUND`] (at least one unit).
pub fn round(n: usize) -> usize {
    n.max(1).next_multiple_of(ROUND)
}

/// A block handed out: where it is and its buffer.
#[derive(Debug)]
pub struct Block<B: Backend> {
    /// Its offset in the segment.
    pub offset: usize,
    /// Its size (rounded).
    pub size: usize,
    /// The buffer over its requested bytes.
    pub buf: BufferOf<B>,
}

/// The bookkeeping of a segment's mapped part, without a device: every block by offset and
/// the free ones by size.
#[derive(Debug, Default)]
pub struct Blocks {
    /// Every block of the mapped part by offset: (size, free).
    blocks: BTreeMap<usize, (usize, bool)>,
    /// Free blocks as (size, offset), for best fit.
    free: BTreeSet<(usize, usize)>,
}

impl Blocks {
    /// Takes the smallest free block of at least `size` bytes, splits off what it does not
    /// need (left free), and returns its offset; `None` when no free block holds `size`.
    pub fn take(&mut self, size: usize) -> Option<usize> {
        let (bsize, off) = self.free.range((size, 0)..).next().copied()?;
        self.free.remove(&(bsize, off));
        self.blocks.insert(off, (size, false));
        if bsize > size {
            self.blocks.insert(off + size, (bsize - size, true));
            self.free.insert((bsize - size, off + size));
        }
        Some(off)
    }

    /// Frees the block `off..off + size` and coalesces it with free neighbours; returns the
    /// free block it became, and the offsets of the neighbours merged into it.
    pub fn give_back(&mut self, off: usize, size: usize) -> ((usize, usize), [Option<usize>; 2]) {
        let (mut off, mut size) = (off, size);
        let mut merged = [None, None];
        if let Some((&o, &(s, true))) = self.blocks.range(..off).next_back() {
            if o + s == off {
                self.free.remove(&(s, o));
                self.blocks.remove(&off);
                merged[0] = Some(o);
                off = o;
                size += s;
            }
        }
        if let Some(&(s, true)) = self.blocks.get(&(off + size)) {
            self.free.remove(&(s, off + size));
            self.blocks.remove(&(off + size));
            merged[1] = Some(off + size);
            size += s;
        }
        self.blocks.insert(off, (size, true));
        self.free.insert((size, off));
        ((off, size), merged)
    }

    /// Adds `n` free bytes at `end` (the mapped part grew there), merged into a free block
    /// ending at `end`; returns the free block's offset.
    pub fn extend(&mut self, end: usize, n: usize) -> usize {
        let tail = self.free_tail(end);
        let (start, old) = tail.unwrap_or((end, 0));
        if old > 0 {
            self.free.remove(&(old, start));
        }
        self.blocks.insert(start, (old + n, true));
        self.free.insert((old + n, start));
        start
    }

    /// The free block ending at `end`, as (offset, size).
    pub fn free_tail(&self, end: usize) -> Option<(usize, usize)> {
        self.blocks
            .range(..end)
            .next_back()
            .filter(|(o, (s, f))| *f && *o + s == end)
            .map(|(o, (s, _))| (*o, *s))
    }
}

/// One stream's expandable segment.
#[derive(Debug)]
pub struct Expandable<B: Backend> {
    range: VirtualRange<B::Device>,
    /// The granularity chunks are mapped in (the device's recommended one).
    pub gran: usize,
    /// Mapped bytes from the start (the segment's end).
    mapped: usize,
    blocks: Blocks,
    /// Events recorded on other streams that used a free block (by the block's offset): the
    /// segment's stream waits for them before it hands the memory out again.
    events: BTreeMap<usize, Vec<EventOf<B>>>,
    /// Waits enqueued for such reuses.
    pub waits: usize,
    /// The most bytes mapped at once.
    pub peak_mapped: usize,
    /// Chunks mapped.
    pub maps: usize,
}

impl<B: Backend> Expandable<B> {
    /// A segment of [`SEGMENT`] bytes of address space on `dev`, nothing mapped.
    ///
    /// # Errors
    /// As [`VirtualMemory::reserve`].
    pub fn new(dev: &B::Device) -> Result<Self> {
        let gran = dev.granularity()?.recommended;
        Ok(Self {
            range: dev.reserve(SEGMENT)?,
            gran,
            mapped: 0,
            blocks: Blocks::default(),
            events: BTreeMap::new(),
            waits: 0,
            peak_mapped: 0,
            maps: 0,
        })
    }

    /// Maps chunks at the end until the last free block (or a new one) holds `size`.
    fn grow(&mut self, size: usize) -> Result<()> {
        let dev = self.range.device().clone();
        // A free block touching the end grows; else a new block starts at the end.
        let have = self.blocks.free_tail(self.mapped).map_or(0, |(_, s)| s);
        let need = (size - have).next_multiple_of(self.gran);
        if self.mapped + need > SEGMENT {
            return Err(Error::OutOfMemory {
                backend: B::KIND,
                detail: format!("the {SEGMENT}-byte segment is full"),
            });
        }
        let phys = dev.create_physical(need)?;
        self.range.map(self.mapped, &phys)?;
        self.range.set_access(self.mapped, need, &dev)?;
        self.maps += 1;
        self.blocks.extend(self.mapped, need);
        self.mapped += need;
        self.peak_mapped = self.peak_mapped.max(self.mapped);
        Ok(())
    }

    /// A block of `len` bytes for the segment's stream `s`, ordered after the other streams'
    /// work on its memory before it was freed.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the segment is full; as [`VirtualMemory::create_physical`],
    /// [`VirtualRange::map`], [`VirtualRange::buffer`], [`Stream::wait_event`].
    pub fn alloc(&mut self, len: usize, s: &StreamOf<B>) -> Result<Block<B>> {
        let size = round(len);
        let off = match self.blocks.take(size) {
            Some(off) => off,
            None => {
                self.grow(size)?;
                self.blocks
                    .take(size)
                    .ok_or_else(|| Error::invalid("grow left no block large enough"))?
            }
        };
        // Stream-ordered reuse: `s` waits for every stream that used this memory; the rest
        // of the block is used on `s` only, so one wait covers it too.
        if !self.events.is_empty() {
            for e in self.events.remove(&off).unwrap_or_default() {
                s.wait_event(&e)?;
                self.waits += 1;
            }
        }
        let buf = self.range.buffer(off, len)?;
        Ok(Block {
            offset: off,
            size,
            buf,
        })
    }

    /// Frees a block (its buffer goes; the memory stays mapped) and coalesces it; `used_on`:
    /// another stream that used it (an event recorded there orders the reuse).
    ///
    /// # Errors
    /// As [`Stream::record_event`].
    pub fn free(&mut self, b: Block<B>, used_on: Option<&StreamOf<B>>) -> Result<()> {
        drop(b.buf);
        let mut events = match used_on {
            Some(t) => vec![t.record_event()?],
            None => Vec::new(),
        };
        let ((off, _), merged) = self.blocks.give_back(b.offset, b.size);
        if !self.events.is_empty() {
            for m in merged.into_iter().flatten() {
                events.extend(self.events.remove(&m).unwrap_or_default());
            }
        }
        if !events.is_empty() {
            self.events.insert(off, events);
        }
        Ok(())
    }
}
