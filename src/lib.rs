//! redis-ratelimit: native rate-limit commands for Redis 7+ and Valkey 8+.
//!
//! `RL.CHECK` / `RL.PEEK` (multi-rule sliding-window log on a sorted set),
//! `RL.DAYHOUR` (day and hour fixed windows that move together) and
//! `RL.LOCKCOUNT` (count, then lock out). See README.md for the command
//! reference. This file only registers the module.

mod commands;
mod config;
mod core;
mod error;
mod info;
mod limiters;
mod redis_api;
mod registration;
mod stats;
mod version;

use redis_module::{
    configuration::ConfigurationFlags, redis_module, Context, InfoContext, RedisResult,
    RedisString, Status,
};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let checked = config::apply_load_args(&args).and_then(|()| registration::register(ctx.ctx));
    match checked {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("ratelimit: {e}"));
            Status::Err
        }
    }
}

/// `MODULE UNLOAD`: frees what the module allocated outside the keyspace —
/// RL.QUOTA's zone and bucket caches (and jiff's cache of parsed zones
/// behind them), its kept field names and the detached context `redis_module!` made at load.
/// They live in Redis's allocator, so each unload and load would otherwise
/// leave them behind (`used_memory` grows).
fn deinit(_ctx: &Context) -> Status {
    limiters::calendar::buckets::free_caches();
    redis_api::free_kept_strings();
    redis_api::free_module_context();
    Status::Ok
}

// Unit tests run outside Redis, where the Redis allocator does not exist.
#[cfg(not(test))]
type Allocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

redis_module! {
    name: "ratelimit",
    // MODULE LIST's `ver`: the crate's semver as one number (0.2.0 -> 200).
    version: version::NUMBER,
    allocator: (Allocator, ALLOCATOR),
    data_types: [],
    init: init,
    deinit: deinit,
    info: add_info,
    commands: [],
    configurations: [
        i64: [
            ["max-future-ms", &config::MAX_FUTURE_MS, 0, 0, core::int::MAX_SAFE, ConfigurationFlags::DEFAULT, None],
            ["max-past-ms", &config::MAX_PAST_MS, 0, 0, core::int::MAX_SAFE, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [],
        enum: [],
        // The module reads its load arguments itself (config::apply_load_args),
        // so a bad value is named in the log.
        module_args_as_configuration: false,
    ]
}

use info::add_info;
