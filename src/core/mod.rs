//! The pure decision core: no Redis types, unit-tested without a server.

pub mod all;
pub mod args;
pub mod binding;
pub mod calendar;
pub mod counters;
pub mod gcra;
pub mod grid;
pub mod int;
pub mod lease;
pub mod lease_args;
pub mod members;
pub mod window;
