//! Thin wrappers over the raw Redis module API (`redis_module::raw`) for what
//! the commands need and the `redis-module` crate does not wrap: sorted sets
//! through the key API, absolute expiry, `RedisModule_Call` on a hot path,
//! and replication of native commands. Every function here returns an
//! [`Error`] instead of panicking when the server refuses. Split by concern:
//! `context` (the call's flags and clock), `strings`, `keys`, `calls`
//! (`RedisModule_Call`), `replication`, `replies`; `base` the context type and
//! the API-pointer macro; this file the module's lifecycle.

use redis_module::raw;

mod context;
pub use context::CallContext;

// First: the `api!` macro the other files use.
#[macro_use]
mod base;
pub use base::{bytes, Ctx, RString};

mod calls;
mod keys;
mod replication;
mod replies;
mod strings;

pub use calls::command_exists;
pub use keys::{Key, Kind};
pub use replication::{Native, NATIVE_COMMANDS};
pub use replies::{reply_error, reply_integers, reply_integers_then, reply_integers_then_groups};
pub use strings::{free_kept_strings, OwnedStrings, StrVec};

/// Frees the detached thread-safe context that `redis_module!` makes at
/// load for its logging (`redis_module::MODULE_CONTEXT`) and clears it, so
/// a later load makes a new one. Only at unload: nothing logs through it
/// afterwards. The crate keeps the pointer in a private field of a
/// one-field struct; it is read through that layout, checked by size here.
pub fn free_module_context() {
    use std::sync::atomic::{AtomicPtr, Ordering};
    const _: () = assert!(
        std::mem::size_of::<redis_module::DetachedContext>()
            == std::mem::size_of::<AtomicPtr<raw::RedisModuleCtx>>()
    );
    // SAFETY: DetachedContext's only field is an AtomicPtr (redis-module
    // 2.0, src/context/mod.rs), so the static is that AtomicPtr; atomics
    // may be written through a shared reference.
    let slot = unsafe {
        &*(&redis_module::MODULE_CONTEXT as *const redis_module::DetachedContext)
            .cast::<AtomicPtr<raw::RedisModuleCtx>>()
    };
    let ctx = slot.swap(std::ptr::null_mut(), Ordering::Relaxed);
    if !ctx.is_null() {
        if let Some(free) = unsafe { raw::RedisModule_FreeThreadSafeContext } {
            unsafe { free(ctx) };
        }
    }
}
