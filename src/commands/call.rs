//! A keyed call as the runners see it: its key, its arguments as bytes,
//! its clock and context.

use smallvec::SmallVec;

use crate::core::args::Clock;
use crate::error::Error;
use crate::redis_api::{bytes, CallContext, Ctx, RString};

/// A `NAME key now ...` call: the key, the arguments after it as bytes,
/// the clock it is evaluated with (the server's, read once, and the clock
/// guard in force), and the context it runs in.
pub struct KeyedCall<'a> {
    pub key: RString,
    /// On the stack for the usual call (up to 24 arguments after the key).
    pub args: SmallVec<[&'a [u8]; 24]>,
    /// The same arguments as the server's strings (a lease's token is its
    /// first unit's name: looked up and written without a copy).
    pub strings: &'a [RString],
    pub clock: Clock,
    context: CallContext,
}

impl<'a> KeyedCall<'a> {
    pub fn new(ctx: Ctx, args: &'a [RString]) -> Result<Self, Error> {
        let [_, key, rest @ ..] = args else {
            return Err(Error::Arg("wrong number of arguments".into()));
        };
        let context = CallContext::read(ctx)?;
        Ok(KeyedCall {
            key: *key,
            args: rest.iter().map(|&s| bytes(s)).collect(),
            strings: rest,
            context,
            clock: Clock {
                server_time: context.server_time,
                max_future_ms: crate::config::MAX_FUTURE_MS
                    .load(std::sync::atomic::Ordering::Relaxed),
                max_past_ms: crate::config::MAX_PAST_MS.load(std::sync::atomic::Ordering::Relaxed),
            },
        })
    }
}

impl KeyedCall<'_> {
    /// SPEC "Memory": see [`CallContext::refuse_if_oom`]. Called by the
    /// writing commands after their argument checks (refunds excepted).
    pub fn refuse_if_oom(&self) -> Result<(), Error> {
        self.context.refuse_if_oom()
    }
}

/// Redis checks arity before calling; this guards the indexing regardless.
pub(super) fn fixed_args<const N: usize>(args: &[RString]) -> Result<&[RString; N], Error> {
    args.try_into()
        .map_err(|_| Error::Arg("wrong number of arguments".into()))
}
