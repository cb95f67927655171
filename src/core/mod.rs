//! The pure parts every limiter shares: no Redis types, unit-tested without
//! a server. Each algorithm's own pure decision lives in its folder under
//! `crate::limiters`.

pub mod all;
pub mod args;
pub mod binding;
pub mod counters;
pub mod decision;
pub mod grid;
pub mod int;
pub mod log_view;
pub mod members;
