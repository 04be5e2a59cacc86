//! The macros the erased layer is written with: `each!` and `pair!` (a match over the compiled
//! backends), `forward!` (the erased methods generated from one list per handle), `erased!` (an
//! erased enum) and `erasable!` (the `Erasable` impl of one backend).

/// Runs `$e` with `$x` bound to the inner value of `$v`, a value (or reference) of the erased
/// enum `$ty`, whatever its variant.
macro_rules! each {
    ($ty:ident, $v:expr, $x:ident => $e:expr) => {
        match $v {
            #[cfg(feature = "host")]
            $ty::Host($x) => $e,
            #[cfg(feature = "cuda-backend")]
            $ty::Cuda($x) => $e,
            #[cfg(feature = "ascend")]
            $ty::Ascend($x) => $e,
        }
    };
}

/// Runs `$e` with `$x` and `$y` bound to the inner values of `$a` (an `$ta`) and `$b` (a
/// `$tb`) when both are of one backend; else returns the mixing error for operation `$op`.
macro_rules! pair {
    ($op:expr, $ta:ident, $a:expr, $tb:ident, $b:expr, $x:ident, $y:ident => $e:expr) => {
        #[allow(unreachable_patterns)]
        match ($a, $b) {
            #[cfg(feature = "host")]
            ($ta::Host($x), $tb::Host($y)) => $e,
            #[cfg(feature = "cuda-backend")]
            ($ta::Cuda($x), $tb::Cuda($y)) => $e,
            #[cfg(feature = "ascend")]
            ($ta::Ascend($x), $tb::Ascend($y)) => $e,
            (a, b) => Err(mixed($op, a.kind(), b.kind())),
        }
    };
}

/// The erased methods that forward to the trait method of the same name: one line per
/// operation, in lists per handle below (`forward! { AnyStream: Stream; ... }`). Each entry is
/// `fn name(args) -> Ret;` after its doc comment; `&self` is implied. An argument written
/// `@arg: &AnyX` (or `@arg: AnyX`, by value) is the erased object of the same backend that the
/// call takes first: objects of two backends give the mixing error. A fallible method gets its
/// `# Errors` section from the trait's; results convert into their erased types with `Into`.
/// Methods with generic parameters, several erased objects or extra work stay hand-written in
/// the `impl` blocks beside the lists.
macro_rules! forward {
    ($ty:ident: $tr:ident; $($rest:tt)*) => {
        impl $ty {
            forward!(@each $ty, $tr; $($rest)*);
        }
    };
    (@each $ty:ident, $tr:ident;) => {};
    // Paired, the erased argument by reference.
    (@each $ty:ident, $tr:ident;
        $(#[$m:meta])* fn $name:ident(@$p:ident: &$pt:ident $(, $a:ident: $t:ty)*) -> Result<$ok:ty>;
        $($rest:tt)*) => {
        $(#[$m])*
        #[doc = ""]
        #[doc = "# Errors"]
        #[doc = concat!("As [`", stringify!($tr), "::", stringify!($name), "`]; [`Error::WrongBackend`] when `",
            stringify!($p), "` is of another backend.")]
        #[inline]
        pub fn $name(&self, $p: &$pt $(, $a: $t)*) -> Result<$ok> {
            pair!(concat!(stringify!($ty), "::", stringify!($name)), $ty, self, $pt, $p, x, y =>
                x.$name(y $(, $a)*).map(Into::into))
        }
        forward!(@each $ty, $tr; $($rest)*);
    };
    // Paired, the erased argument by value.
    (@each $ty:ident, $tr:ident;
        $(#[$m:meta])* fn $name:ident(@$p:ident: $pt:ident $(, $a:ident: $t:ty)*) -> Result<$ok:ty>;
        $($rest:tt)*) => {
        $(#[$m])*
        #[doc = ""]
        #[doc = "# Errors"]
        #[doc = concat!("As [`", stringify!($tr), "::", stringify!($name), "`]; [`Error::WrongBackend`] when `",
            stringify!($p), "` is of another backend.")]
        #[inline]
        pub fn $name(&self, $p: $pt $(, $a: $t)*) -> Result<$ok> {
            pair!(concat!(stringify!($ty), "::", stringify!($name)), $ty, self, $pt, $p, x, y =>
                x.$name(y $(, $a)*).map(Into::into))
        }
        forward!(@each $ty, $tr; $($rest)*);
    };
    // Fallible.
    (@each $ty:ident, $tr:ident;
        $(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> Result<$ok:ty>;
        $($rest:tt)*) => {
        $(#[$m])*
        #[doc = ""]
        #[doc = "# Errors"]
        #[doc = concat!("As [`", stringify!($tr), "::", stringify!($name), "`].")]
        #[inline]
        pub fn $name(&self $(, $a: $t)*) -> Result<$ok> {
            each!($ty, self, x => x.$name($($a),*).map(Into::into))
        }
        forward!(@each $ty, $tr; $($rest)*);
    };
    // Infallible.
    (@each $ty:ident, $tr:ident;
        $(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> $ret:ty;
        $($rest:tt)*) => {
        $(#[$m])*
        #[inline]
        pub fn $name(&self $(, $a: $t)*) -> $ret {
            each!($ty, self, x => x.$name($($a),*))
        }
        forward!(@each $ty, $tr; $($rest)*);
    };
}

/// The `kind` method of an erased enum (variants `Host`, `Cuda`, `Ascend`).
macro_rules! kind_fn {
    () => {
        /// Which backend it belongs to.
        pub fn kind(&self) -> BackendKind {
            match self {
                #[cfg(feature = "host")]
                Self::Host(_) => BackendKind::Host,
                #[cfg(feature = "cuda-backend")]
                Self::Cuda(_) => BackendKind::Cuda,
                #[cfg(feature = "ascend")]
                Self::Ascend(_) => BackendKind::Ascend,
            }
        }
    };
}

/// Defines an erased enum over the compiled backends, with `kind`, `From` and `downcast`.
macro_rules! erased {
    ($(#[$m:meta])* $name:ident, $assoc:ident, $get:ident, $h:ident, $c:ident, $a:ident) => {
        $(#[$m])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            /// The host (CPU) backend's.
            #[cfg(feature = "host")]
            Host(crate::host::$h),
            /// The CUDA backend's.
            #[cfg(feature = "cuda-backend")]
            Cuda(crate::cuda::$c),
            /// The Ascend backend's.
            #[cfg(feature = "ascend")]
            Ascend(crate::ascend::$a),
        }

        impl $name {
            kind_fn!();

            /// The typed object of the generic path, when it is of backend `B`.
            pub fn downcast_ref<B: Erasable>(&self) -> Option<&<B as Backend>::$assoc> {
                B::$get(self)
            }
        }

        #[cfg(feature = "host")]
        impl From<crate::host::$h> for $name {
            fn from(x: crate::host::$h) -> Self {
                Self::Host(x)
            }
        }

        #[cfg(feature = "cuda-backend")]
        impl From<crate::cuda::$c> for $name {
            fn from(x: crate::cuda::$c) -> Self {
                Self::Cuda(x)
            }
        }

        #[cfg(feature = "ascend")]
        impl From<crate::ascend::$a> for $name {
            fn from(x: crate::ascend::$a) -> Self {
                Self::Ascend(x)
            }
        }
    };
}

macro_rules! erasable {
    ($feat:literal, $B:ty, $v:ident) => {
        #[cfg(feature = $feat)]
        impl sealed::Sealed for $B {}
        #[cfg(feature = $feat)]
        impl Erasable for $B {
            erasable!(@of device_of, AnyDevice, Self::Device, $v);
            erasable!(@of stream_of, AnyStream, Self::Stream, $v);
            erasable!(@of event_of, AnyEvent, Self::Event, $v);
            erasable!(@of buffer_of, AnyBuffer, Self::Buffer, $v);
            erasable!(@of graph_of, AnyGraph, Self::Graph, $v);
            erasable!(@of module_of, AnyModule, Self::Module, $v);
            erasable!(@of function_of, AnyFunction, Self::Function, $v);
            erasable!(@of pinned_buffer_of, AnyPinnedBuffer, PinnedBuffer<Self>, $v);
            fn pinned_buffer_of_mut(h: &mut AnyPinnedBuffer) -> Option<&mut PinnedBuffer<Self>> {
                #[allow(unreachable_patterns)]
                match h {
                    AnyPinnedBuffer::$v(x) => Some(x),
                    _ => None,
                }
            }
            fn wrap_pinned_buffer(h: PinnedBuffer<Self>) -> AnyPinnedBuffer {
                AnyPinnedBuffer::$v(h)
            }
        }
    };
    // One `Erasable` accessor: the backend's value inside an erased handle, if it is this one.
    (@of $fn:ident, $Any:ident, $T:ty, $v:ident) => {
        fn $fn(x: &$Any) -> Option<&$T> {
            #[allow(unreachable_patterns)]
            match x {
                $Any::$v(x) => Some(x),
                _ => None,
            }
        }
    };
}
