//! Typed stream attributes (CUDA `cuStreamGetAttribute`/`SetAttribute`/`CopyAttributes`, ACL
//! `aclrtGetStreamAttribute`/`SetStreamAttribute`/`SetStreamFailureMode`).

/// Which attribute to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamAttr {
    /// The stream's native priority.
    Priority,
    /// How a thread waits in `synchronize` (CUDA `CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY`).
    SyncPolicy,
    /// The L2 persisting-access window (CUDA `CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`).
    AccessPolicyWindow,
    /// What the stream does after a failed task (ACL `ACL_STREAM_ATTR_FAILURE_MODE`).
    FailureMode,
    /// A user tag carried by the stream (ACL `ACL_STREAM_ATTR_USER_CUSTOM_TAG`).
    UserTag,
}

/// How a thread waits for a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncPolicy {
    /// The vendor's heuristic.
    Auto,
    /// Spin.
    Spin,
    /// Spin, yielding the core between polls.
    Yield,
    /// Block on an OS primitive.
    BlockingSync,
}

/// Cache hint for accesses inside or outside an access-policy window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessProperty {
    /// Normal caching.
    Normal,
    /// Streaming (evict first).
    Streaming,
    /// Persisting in L2.
    Persisting,
}

/// An L2 access-policy window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccessPolicyWindow {
    /// Device address of the window's start.
    pub base: u64,
    /// Length in bytes.
    pub bytes: usize,
    /// Fraction of accesses that get `hit`, in `[0, 1]`.
    pub hit_ratio: f32,
    /// Property for hits.
    pub hit: AccessProperty,
    /// Property for misses.
    pub miss: AccessProperty,
}

/// What a stream does after a task fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureMode {
    /// Keep executing later tasks (default).
    Continue,
    /// Stop executing tasks of the context.
    Stop,
}

/// A typed attribute value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamAttrValue {
    /// See [`StreamAttr::Priority`].
    Priority(i32),
    /// See [`StreamAttr::SyncPolicy`].
    SyncPolicy(SyncPolicy),
    /// See [`StreamAttr::AccessPolicyWindow`].
    AccessPolicyWindow(AccessPolicyWindow),
    /// See [`StreamAttr::FailureMode`].
    FailureMode(FailureMode),
    /// See [`StreamAttr::UserTag`].
    UserTag(u32),
}

impl StreamAttrValue {
    /// The attribute this value belongs to.
    pub fn attr(&self) -> StreamAttr {
        match self {
            Self::Priority(_) => StreamAttr::Priority,
            Self::SyncPolicy(_) => StreamAttr::SyncPolicy,
            Self::AccessPolicyWindow(_) => StreamAttr::AccessPolicyWindow,
            Self::FailureMode(_) => StreamAttr::FailureMode,
            Self::UserTag(_) => StreamAttr::UserTag,
        }
    }

    /// Checks ranges that no vendor accepts (e.g. a hit ratio outside `[0, 1]`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn validate(&self) -> crate::Result<()> {
        if let Self::AccessPolicyWindow(w) = self {
            if !(0.0..=1.0).contains(&w.hit_ratio) {
                return Err(crate::Error::invalid(format!(
                    "access policy hit ratio {} is outside [0, 1]",
                    w.hit_ratio
                )));
            }
        }
        Ok(())
    }
}
