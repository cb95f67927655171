//! The limiters RL.ALL runs, as one enum: a clause's arguments
//! ([`AnyArgs`]) and its state read from its key ([`AnyLimiter`]), each
//! call passed to the limiter it names.

use super::calendar::Calendar;
use super::gcra::TokenBucket;
use super::lease::Lease;
use super::limiter::{Limiter, Mode, Phase, Request, RuleReplies, Verdict};
use super::sliding_log::SlidingLog;
use crate::core::all::Kind;
use crate::core::args::Clock;
use crate::error::Error;
use crate::redis_api::{self, Ctx, Key, RString};

/// The registry of limiters RL.ALL runs: for each, its clause word
/// (`core::all::Kind`) and its type. Defines [`AnyArgs`] and
/// [`AnyLimiter`], the clause as a value of one of them.
macro_rules! limiters {
    ($($kind:ident => $ty:ty),* $(,)?) => {
        /// A clause's checked arguments, of whichever limiter it names.
        pub enum AnyArgs<'a> {
            $($kind(<$ty as Limiter>::Args<'a>),)*
        }

        /// A clause's state read from its key, of whichever limiter. Its
        /// size is its largest limiter's (a few hundred bytes, the stack
        /// room that spares a call its allocations): boxing it would
        /// allocate per clause.
        #[allow(clippy::large_enum_variant)]
        pub enum AnyLimiter {
            $($kind($ty),)*
        }

        impl<'a> AnyArgs<'a> {
            pub fn parse_clause(
                kind: Kind,
                args: &[&'a [u8]],
                mode: Mode,
                clock: &Clock,
            ) -> Result<Self, Error> {
                Ok(match kind {
                    $(Kind::$kind => AnyArgs::$kind(<$ty>::parse_clause(args, mode, clock)?),)*
                })
            }

            pub fn request(&self) -> Request {
                match self { $(AnyArgs::$kind(a) => <$ty>::request(a),)* }
            }

            pub fn cost(&self) -> i64 {
                match self { $(AnyArgs::$kind(a) => <$ty>::cost(a),)* }
            }

            pub fn rules(&self) -> usize {
                match self { $(AnyArgs::$kind(a) => <$ty>::rules(a),)* }
            }

            pub fn redis_kind(&self) -> redis_api::Kind {
                match self { $(AnyArgs::$kind(_) => <$ty>::KIND,)* }
            }

            pub fn read(self, ctx: Ctx, name: RString, key: Key, clock: &Clock) -> Result<AnyLimiter, Error> {
                Ok(match self {
                    $(AnyArgs::$kind(a) => AnyLimiter::$kind(<$ty>::read(ctx, name, key, a, clock)?),)*
                })
            }
        }

        impl AnyLimiter {
            pub fn decide(&mut self) -> Result<Verdict, Error> {
                match self { $(AnyLimiter::$kind(l) => l.decide(),)* }
            }

            pub fn commit(&mut self) -> Result<[i64; 6], Error> {
                match self { $(AnyLimiter::$kind(l) => l.commit(),)* }
            }

            pub fn refund(&mut self) -> Result<[i64; 6], Error> {
                match self { $(AnyLimiter::$kind(l) => l.refund(),)* }
            }

            pub fn details(&mut self, phase: Phase) -> Result<RuleReplies, Error> {
                match self { $(AnyLimiter::$kind(l) => l.details(phase),)* }
            }
        }
    };
}

limiters! {
    Check => SlidingLog,
    Throttle => TokenBucket,
    Quota => Calendar,
    Lease => Lease,
}
