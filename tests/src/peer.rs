//! Conformance check of copies between devices ([`Stream::copy_peer`]).

use xstream_core::{Backend, Capabilities, Device, Error, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Outcome};

/// Bytes `0..len` as a recognisable pattern.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// With peer access enabled, bytes move both ways between the device under test and a peer,
/// in stream order; without it (never enabled, or disabled again) the copy is refused with
/// `NotPermitted`; out-of-bounds ranges and buffers of neither device are `InvalidArgument`
/// and `WrongDevice`.
pub(crate) fn peer_copy<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::PEER_COPY, "copies between devices");
    let me = env.device.info().ordinal;
    let n = B::device_count().ctx("device_count")?;
    let Some(peer_ord) = (0..n).find(|&o| o != me) else {
        return Ok(Outcome::Skip(format!(
            "one {:?} device: no peer to copy with",
            B::KIND
        )));
    };
    let peer = B::open(peer_ord).ctx("open peer")?;
    if !env.device.can_access_peer(&peer).ctx("can_access_peer")? {
        return Ok(Outcome::Skip(format!(
            "device {me} cannot access device {peer_ord}"
        )));
    }
    let self_peer = env
        .device
        .can_access_peer(&env.device)
        .ctx("can_access_peer(self)")?;
    ensure!(!self_peer, "a device reported itself as its own peer");
    ensure!(
        matches!(
            env.device.enable_peer_access(&env.device),
            Err(Error::InvalidArgument(_))
        ),
        "enable_peer_access(self) was not InvalidArgument"
    );

    const LEN: usize = 4096;
    let s = env.device.create_stream(&nb()).ctx("create_stream")?;
    let mine = env.device.alloc(LEN).ctx("alloc")?;
    let theirs = peer.alloc(LEN).ctx("alloc on peer")?;
    let src = pattern(LEN, 0x5a);
    s.write(&mine, 0, src.clone()).ctx("write")?;

    // Access never enabled (or withdrawn by an earlier run in this process): refused.
    let _ = env.device.disable_peer_access(&peer);
    match s.copy_peer(&mine, 0, &theirs, 0, LEN) {
        Err(e) if e.kind() == xstream_core::ErrorKind::NotPermitted => {}
        other => return Err(format!("copy_peer without peer access: {other:?}")),
    }

    env.device
        .enable_peer_access(&peer)
        .ctx("enable_peer_access")?;
    env.device
        .enable_peer_access(&peer)
        .ctx("enable_peer_access a second time")?;
    // Out to the peer, then back into the second half of our buffer, in one stream's order.
    s.copy_peer(&mine, 0, &theirs, 0, LEN)
        .ctx("copy_peer out")?;
    s.copy_peer(&theirs, 0, &mine, LEN / 2, LEN / 2)
        .ctx("copy_peer back")?;
    let got = read_all::<B>(&s, &mine)?;
    let mut want = src.clone();
    want.copy_within(0..LEN / 2, LEN / 2);
    ensure!(got == want, "bytes after the round trip differ");
    let ps = peer.create_stream(&nb()).ctx("peer create_stream")?;
    let on_peer = read_all::<B>(&ps, &theirs)?;
    ensure!(
        on_peer == src,
        "the peer's buffer does not hold the copied bytes"
    );

    // Bad input.
    ensure!(
        matches!(
            s.copy_peer(&mine, 1, &theirs, 0, LEN),
            Err(Error::InvalidArgument(_))
        ),
        "an out-of-bounds source range was not InvalidArgument"
    );
    ensure!(
        matches!(
            s.copy_peer(&mine, 0, &theirs, LEN, 1),
            Err(Error::InvalidArgument(_))
        ),
        "an out-of-bounds destination range was not InvalidArgument"
    );
    let theirs2 = peer.alloc(16).ctx("alloc on peer")?;
    ensure!(
        matches!(
            s.copy_peer(&theirs, 0, &theirs2, 0, 16),
            Err(Error::WrongDevice(_))
        ),
        "a copy between two buffers of the peer on this device's stream was not WrongDevice"
    );
    env.device
        .disable_peer_access(&peer)
        .ctx("disable_peer_access")?;
    match s.copy_peer(&theirs, 0, &mine, 0, LEN) {
        Err(e) if e.kind() == xstream_core::ErrorKind::NotPermitted => {}
        other => return Err(format!("copy_peer after disable_peer_access: {other:?}")),
    }
    ensure!(
        matches!(
            env.device.disable_peer_access(&peer),
            Err(Error::InvalidArgument(_))
        ),
        "disabling access that is not enabled was not InvalidArgument"
    );
    s.synchronize().ctx("synchronize")?;
    pass(format!(
        "device {me} <-> device {peer_ord}: round trip exact; no access, out of bounds and \
         foreign buffers refused"
    ))
}
