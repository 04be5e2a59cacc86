//! loom models of the two concurrency protocols the callback contract rests on. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p xstream-core --test loom --release` (scripts/reliability.sh
//! does); without `--cfg loom` this file is empty.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::sync::Arc;
use loom::thread;
use xstream_core::callback::{CallbackSlot, PanicSlot, PendingCallbacks};
use xstream_core::completion::completion;
use xstream_core::Error;

/// The vendor trampoline and xstream's failure path race to fire one callback: in every
/// interleaving it runs exactly once, and exactly one of the two reports having run it.
#[test]
fn callback_slot_fires_exactly_once() {
    loom::model(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let slot = CallbackSlot::new(
            Box::new(move |_| {
                c.fetch_add(1, SeqCst);
            }),
            Arc::new(PanicSlot::default()),
        );
        let pending = PendingCallbacks::default();
        pending.track(&slot);
        let vendor = {
            let slot = slot.clone();
            thread::spawn(move || slot.fire(Ok(())))
        };
        let failed = pending.fail_all(&Error::NotReady);
        let ran_by_vendor = vendor.join().unwrap();
        assert_eq!(count.load(SeqCst), 1);
        assert_eq!(usize::from(ran_by_vendor) + failed, 1);
        assert!(slot.is_fired());
    });
}

/// A slot reused while the vendor may still be finishing it: the pending list hands it out
/// again only after the vendor dropped its reference (the reuse is ordered after the vendor's
/// last use), the old callback runs once, the new one runs once, and the failure path reaches
/// the new one whether or not it is the reused slot.
#[test]
fn a_slot_is_reused_only_after_the_vendor_let_go() {
    loom::model(|| {
        let pending = PendingCallbacks::default();
        let panics = Arc::new(PanicSlot::default());
        let (old, new) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let o = old.clone();
        let s = pending.slot(
            Box::new(move |_| {
                o.fetch_add(1, SeqCst);
            }),
            &panics,
        );
        pending.track(&s);
        let vendor = {
            let s = s.clone();
            thread::spawn(move || s.fire(Ok(())))
        };
        drop(s);
        let n2 = new.clone();
        let n = pending.slot(
            Box::new(move |_| {
                n2.fetch_add(1, SeqCst);
            }),
            &panics,
        );
        assert!(!n.is_fired());
        pending.track(&n);
        let failed = pending.fail_all(&Error::NotReady);
        let ran_by_vendor = vendor.join().unwrap();
        assert_eq!(old.load(SeqCst), 1);
        assert_eq!(new.load(SeqCst), 1);
        assert_eq!(usize::from(ran_by_vendor) + failed, 2);
    });
}

/// Two panicking callbacks of one stream on two threads: the panic slot reports one panic,
/// once.
#[test]
fn panic_slot_reports_once() {
    loom::model(|| {
        let panics = Arc::new(PanicSlot::default());
        let a = CallbackSlot::new(Box::new(|_| panic!("a")), panics.clone());
        let t = thread::spawn(move || a.fire(Ok(())));
        let b = CallbackSlot::new(Box::new(|_| panic!("b")), panics.clone());
        b.fire(Ok(()));
        t.join().unwrap();
        assert!(panics.take().is_err());
        assert!(panics.take().is_ok());
    });
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// The completion future never misses a wake-up: if a poll saw `Pending`, the signal's
/// completion wakes the waker, and the next poll is `Ready` with the signal's result.
#[test]
fn completion_never_misses_a_wakeup() {
    loom::model(|| {
        let (mut fut, sig) = completion();
        let t = thread::spawn(move || sig.complete(Ok(())));
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let first = Pin::new(&mut fut).poll(&mut cx);
        t.join().unwrap();
        match first {
            Poll::Ready(r) => assert!(r.is_ok()),
            Poll::Pending => {
                assert!(
                    flag.0.load(SeqCst),
                    "completed after a Pending poll without waking"
                );
                assert!(matches!(
                    Pin::new(&mut fut).poll(&mut cx),
                    Poll::Ready(Ok(()))
                ));
            }
        }
    });
}

/// A signal dropped on another thread (its work path vanished) resolves the future with an
/// error instead of leaving it pending forever.
#[test]
fn dropped_signal_resolves_with_an_error() {
    loom::model(|| {
        let (mut fut, sig) = completion();
        let t = thread::spawn(move || drop(sig));
        let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let first = Pin::new(&mut fut).poll(&mut cx);
        t.join().unwrap();
        let r = match first {
            Poll::Ready(r) => r,
            Poll::Pending => {
                assert!(flag.0.load(SeqCst));
                match Pin::new(&mut fut).poll(&mut cx) {
                    Poll::Ready(r) => r,
                    Poll::Pending => panic!("future pending after its signal was dropped"),
                }
            }
        };
        assert!(matches!(r, Err(Error::CallbackCancelled(_))));
    });
}
