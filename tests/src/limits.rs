//! Resource limits: streams, then events, are created until the device refuses or a cap is
//! reached; the device keeps working and everything comes back on drop.

use xstream_core::{Backend, Device, ErrorKind, Event, EventDesc, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

/// Streams the check creates on a device that documents no stream limit
/// ([`DeviceInfo::max_streams`](xstream_core::DeviceInfo::max_streams) is `None`: the host
/// backend, whose streams are threads, and CUDA). Reaching it with every stream working passes.
pub const STREAM_CAP_WITHOUT_LIMIT: u32 = 4096;

/// How far below a documented stream limit a refusal may come: the streams the backend or the
/// runtime keeps for itself (default, internal and pooled streams) are not the check's.
pub const STREAM_LIMIT_SLACK: u32 = 64;

/// Events the check creates: one past the largest per-device event limit a vendor documents
/// (65536, Atlas A2/A3). A device may refuse earlier with `ResourceExhausted` ([`ErrorKind`]) (the
/// simulated A2 at 65536; real runtimes take an event's hardware id at its first record).
pub const EVENT_CAP: u32 = 65_537;

/// Creates streams until the device answers `ResourceExhausted` ([`ErrorKind`]) or the cap is reached.
/// `Ok((streams, refused))`; any other error fails.
fn streams_until_refused<B: Backend>(
    dev: &B::Device,
    cap: u32,
) -> Result<(Vec<B::Stream>, Option<String>), String> {
    let mut v = Vec::new();
    while v.len() < cap as usize {
        match dev.create_stream(&nb()) {
            Ok(s) => v.push(s),
            Err(e) if e.kind() == ErrorKind::ResourceExhausted => {
                return Ok((v, Some(e.to_string())))
            }
            Err(e) => return Err(format!("stream {} refused with {e}", v.len())),
        }
    }
    Ok((v, None))
}

/// Streams of `n` the check puts work on: the first, the last and every
/// [`WORK_STRIDE`]th. On the real CANN runtime each synchronize scans every live stream's
/// queue, so work on all of 2000 streams would take minutes.
fn sampled(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).step_by(WORK_STRIDE).collect();
    if n > 0 && v.last() != Some(&(n - 1)) {
        v.push(n - 1);
    }
    v
}

/// Every how many streams one gets work in the `resource_limits` check.
pub const WORK_STRIDE: usize = 128;

/// Each sampled stream writes its index into its own word of one buffer and is synchronized;
/// the words read back.
fn sampled_streams_work<B: Backend>(
    dev: &B::Device,
    streams: &[B::Stream],
) -> Result<usize, String> {
    let picks = sampled(streams.len());
    let buf = dev.alloc(picks.len() * 4).ctx("alloc")?;
    for (k, &i) in picks.iter().enumerate() {
        streams[i]
            .write(&buf, k * 4, (i as u32).to_le_bytes().to_vec())
            .map_err(|e| format!("write on stream {i}: {e}"))?;
        streams[i]
            .synchronize()
            .map_err(|e| format!("synchronize stream {i}: {e}"))?;
    }
    let got = read_all::<B>(&streams[0], &buf)?;
    for (w, &i) in got.chunks_exact(4).zip(&picks) {
        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        ensure!(
            v == i as u32,
            "stream {i}'s word holds {v}: its write was lost"
        );
    }
    Ok(picks.len())
}

/// A 1 KiB pattern through a fresh stream and buffer.
fn round_trip<B: Backend>(dev: &B::Device, what: &str) -> Result<(), String> {
    let s = dev
        .create_stream(&nb())
        .map_err(|e| format!("{what}: create: {e}"))?;
    let buf = dev.alloc(1024).map_err(|e| format!("{what}: alloc: {e}"))?;
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
    s.write(&buf, 0, data.clone())
        .map_err(|e| format!("{what}: write: {e}"))?;
    let got = read_all::<B>(&s, &buf).map_err(|e| format!("{what}: {e}"))?;
    ensure!(got == data, "{what}: the round trip changed the bytes");
    Ok(())
}

pub(crate) fn resource_limits<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let documented = dev.info().max_streams;
    let cap = documented.map_or(STREAM_CAP_WITHOUT_LIMIT, |m| m + m / 2);
    let (streams, refused) = streams_until_refused::<B>(dev, cap)?;
    let made = streams.len() as u32;
    match (documented, &refused) {
        (Some(m), None) => {
            return Err(format!(
                "{made} streams created, no refusal, though the device holds {m}"
            ))
        }
        (Some(m), Some(_)) => ensure!(
            made + STREAM_LIMIT_SLACK >= m,
            "refused after {made} streams, well below the {m} the device reports"
        ),
        (None, _) => {}
    }
    ensure!(made > 0, "not even one stream: {refused:?}");
    let worked = sampled_streams_work::<B>(dev, &streams)?;
    let at_limit = match refused {
        Some(ref e) => format!("refused at stream {} ({e})", made + 1),
        None => format!("cap of {cap} reached"),
    };
    drop(streams);
    round_trip::<B>(dev, "after dropping the streams")?;
    // Every stream came back: the same number can be created again.
    let again = streams_until_refused::<B>(dev, made)?;
    ensure!(
        again.1.is_none(),
        "after the drop only {} of {made} streams could be created again: {:?}",
        again.0.len(),
        again.1
    );
    drop(again);

    let s = dev.create_stream(&nb()).ctx("stream for events")?;
    let mut events = Vec::new();
    let mut ev_refused = None;
    while events.len() < EVENT_CAP as usize {
        match dev.create_event(&EventDesc::new()) {
            Ok(e) => events.push(e),
            Err(e) if e.kind() == ErrorKind::ResourceExhausted => {
                ev_refused = Some(e.to_string());
                break;
            }
            Err(e) => return Err(format!("event {} refused with {e}", events.len())),
        }
    }
    let n_ev = events.len();
    ensure!(n_ev > 0, "not even one event: {ev_refused:?}");
    for i in [0, n_ev / 2, n_ev - 1] {
        events[i]
            .record(&s)
            .map_err(|e| format!("record event {i} of {n_ev}: {e}"))?;
        events[i]
            .synchronize()
            .map_err(|e| format!("synchronize event {i}: {e}"))?;
    }
    drop(events);
    drop(s);
    round_trip::<B>(dev, "after dropping the events")?;
    let ev = match ev_refused {
        Some(e) => format!("events refused at {} ({e})", n_ev + 1),
        None => format!("{n_ev} events (the cap)"),
    };
    pass(format!(
        "{made} streams ({worked} of them given work, all of it done), {at_limit}; all created again after the drop; {ev}; copies round-trip after each drop"
    ))
}
