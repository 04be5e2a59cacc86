//! Sending a [`ShareableHandle`] to another process over a Unix domain socket: its bytes as
//! data and, where it has one (CUDA's POSIX file descriptor), its descriptor as `SCM_RIGHTS`
//! ancillary data, so that the receiving process gets a descriptor of its own for the same
//! object (a descriptor number means nothing in another process). Handles of any backend go
//! this way (those without a descriptor send the bytes alone).
//!
//! Linux / Unix only; the one place of the crate outside `ffi` with `unsafe` (`sendmsg` /
//! `recvmsg` through `libc`).
#![allow(unsafe_code)]

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use xstream_core::vmm_share::SHAREABLE_HANDLE_LEN;
use xstream_core::{Error, Result, ShareableHandle};

fn io_err(what: &str, e: io::Error) -> Error {
    Error::external(format!("fdpass: {what}"), e)
}

/// The control buffer for one descriptor, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Sends `handle` (bytes, then its descriptor if any) on `sock`.
///
/// # Errors
/// [`Error::External`] for a socket error.
pub fn send_handle(sock: &UnixStream, handle: &ShareableHandle) -> Result<()> {
    let bytes = handle.as_bytes();
    let mut ctl = Control([0; 64]);
    // SAFETY: an all-zero `msghdr` is valid (no name, no buffers yet).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iovlen = 1;
    if let Some(fd) = handle.fd() {
        let raw = fd.as_raw_fd();
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) };
        msg.msg_control = ctl.0.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer (64 bytes, aligned) holds one header with one `int`;
        // CMSG_FIRSTHDR points into it and CMSG_DATA past its header.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), raw);
        }
    }
    let mut sent = 0usize;
    while sent < bytes.len() {
        let mut iov = libc::iovec {
            iov_base: bytes[sent..].as_ptr() as *mut libc::c_void,
            iov_len: bytes.len() - sent,
        };
        msg.msg_iov = &mut iov;
        // SAFETY: `msg` points at live buffers (`iov` over `bytes`, `ctl`) for the call.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io_err("sendmsg", e));
        }
        sent += n as usize;
        // The descriptor went with the first bytes; the rest is plain data.
        msg.msg_control = std::ptr::null_mut();
        msg.msg_controllen = 0;
    }
    Ok(())
}

/// Receives a handle sent by [`send_handle`] on `sock` (blocking).
///
/// # Errors
/// [`Error::External`] for a socket error or a connection closed early;
/// [`Error::InvalidArgument`] for bytes that are no handle, or a descriptor missing where the
/// bytes announce one.
pub fn recv_handle(sock: &UnixStream) -> Result<ShareableHandle> {
    let mut bytes = [0u8; SHAREABLE_HANDLE_LEN];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut ctl = Control([0; 64]);
    // SAFETY: an all-zero `msghdr` is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.0.as_mut_ptr().cast();
    msg.msg_controllen = ctl.0.len() as _;
    let n = loop {
        // SAFETY: `msg` points at live buffers (`bytes`, `ctl`) for the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(io_err("recvmsg", e));
        }
    };
    let mut fd = None;
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer only
    // within `msg_controllen`; a SCM_RIGHTS payload is an array of `int`s, each a new
    // descriptor of this process that nothing else owns.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*c).cmsg_len as usize - header) / std::mem::size_of::<libc::c_int>();
                for i in 0..count {
                    let raw = std::ptr::read_unaligned(data.add(i));
                    let owned = OwnedFd::from_raw_fd(raw);
                    // Keep the first; any further one is closed.
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(Error::invalid(
            "fdpass: the descriptor was cut off (more than one sent?)",
        ));
    }
    if n == 0 {
        return Err(io_err(
            "recvmsg",
            io::Error::from(io::ErrorKind::UnexpectedEof),
        ));
    }
    let mut r: &UnixStream = sock;
    r.read_exact(&mut bytes[n..])
        .map_err(|e| io_err("read", e))?;
    ShareableHandle::from_parts(&bytes, fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use xstream_core::{BackendKind, ShareablePayload};

    #[test]
    fn a_handle_and_its_descriptor_cross_a_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let dir = std::env::temp_dir().join(format!("xstream-fdpass-{}", std::process::id()));
        std::fs::write(&dir, b"through the socket").unwrap();
        let f = std::fs::File::open(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        let h = ShareableHandle::new(
            BackendKind::Cuda,
            0,
            2 << 20,
            ShareablePayload {
                bytes: vec![],
                fd: Some(f.into()),
            },
        )
        .unwrap();
        send_handle(&a, &h).unwrap();
        let got = recv_handle(&b).unwrap();
        assert_eq!(got.as_bytes(), h.as_bytes());
        let fd = got.fd().expect("the descriptor came along");
        assert_ne!(fd.as_raw_fd(), h.fd().unwrap().as_raw_fd());
        let mut text = String::new();
        std::fs::File::from(fd.as_fd().try_clone_to_owned().unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "through the socket");
        // A handle without a descriptor; then a closed peer.
        let plain = ShareableHandle::new(
            BackendKind::Host,
            0,
            2 << 20,
            ShareablePayload {
                bytes: b"name".to_vec(),
                fd: None,
            },
        )
        .unwrap();
        send_handle(&a, &plain).unwrap();
        let got = recv_handle(&b).unwrap();
        assert!(got.fd().is_none() && got.payload() == b"name");
        drop(a);
        assert!(recv_handle(&b).is_err());
    }
}
