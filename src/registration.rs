//! The command table: names, flags, arity and key specs.
//!
//! Key specs go through `RedisModule_SetCommandInfo` (present in Redis 7.0)
//! rather than the crate's `#[command]` macro, which also sets ACL categories
//! and so fails to load on 7.0. With key specs, `COMMAND GETKEYS`, ACL key
//! patterns (read-only `%R~` included) and Cluster routing see every key.

use std::ffi::{c_char, c_int, CString};
use std::ptr;

use redis_module::commands::{get_redis_key_spec, BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::raw;

use crate::commands;
use crate::redis_api::{command_exists, NATIVE_COMMANDS};

type CommandFn =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

struct Command {
    name: &'static str,
    handler: CommandFn,
    flags: &'static str,
    /// Redis's arity: negative means "at least".
    arity: c_int,
    /// Flags of the key spec of each key, in argument order from index 1.
    keys: &'static [KeySpecFlags],
    summary: &'static str,
    complexity: &'static str,
}

const RW_UPDATE: KeySpecFlags = KeySpecFlags::READ_WRITE
    .union(KeySpecFlags::ACCESS)
    .union(KeySpecFlags::UPDATE);

const COMMANDS: &[Command] = &[
    Command {
        name: "rl.check",
        handler: commands::rl_check,
        flags: "write deny-oom",
        arity: -5,
        keys: &[RW_UPDATE],
        summary: "Sliding-window log check against one or more rules; admits (and records) or rejects atomically.",
        complexity: "O(R log N + C + M): R distinct windows, N members, C the cost, M members trimmed.",
    },
    Command {
        name: "rl.peek",
        handler: commands::rl_peek,
        flags: "readonly fast",
        arity: -5,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        summary: "What RL.CHECK would answer now, without writing anything.",
        complexity: "O(R log N): R distinct windows, N members.",
    },
    Command {
        name: "rl.dayhour",
        handler: commands::rl_dayhour,
        flags: "write deny-oom fast",
        arity: 7,
        keys: &[RW_UPDATE, RW_UPDATE],
        summary: "Two fixed-window counters (day and hour) that admit and count together, or not at all.",
        complexity: "O(1)",
    },
    Command {
        name: "rl.lockcount",
        handler: commands::rl_lockcount,
        flags: "write deny-oom fast",
        arity: 6,
        keys: &[
            // ACCESS: a locked call returns the lock's TTL.
            KeySpecFlags::READ_WRITE.union(KeySpecFlags::ACCESS).union(KeySpecFlags::INSERT),
            KeySpecFlags::READ_WRITE.union(KeySpecFlags::ACCESS).union(KeySpecFlags::UPDATE),
        ],
        summary: "Count requests in a fixed window; past the maximum, set a lock key that rejects until it expires.",
        complexity: "O(1)",
    },
];

const INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Registers every command; an error message on failure (the load fails).
pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    for name in NATIVE_COMMANDS {
        if !command_exists(ctx, name).map_err(|e| e.reply_text())? {
            return Err(format!(
                "the server has no '{}' command (renamed or disabled?); the module needs it to count or to replicate its writes",
                name.to_string_lossy()
            ));
        }
    }
    // Keys are signalled as modified only after real writes (see Ctx::signal_modified).
    if let Some(set_options) = unsafe { raw::RedisModule_SetModuleOptions } {
        unsafe {
            set_options(
                ctx,
                raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int,
            )
        };
    }
    for c in COMMANDS {
        register_one(ctx, c).map_err(|e| format!("{}: {e}", c.name))?;
    }
    Ok(())
}

fn register_one(ctx: *mut raw::RedisModuleCtx, c: &Command) -> Result<(), String> {
    let (Some(create), Some(get), Some(set_info)) = (
        unsafe { raw::RedisModule_CreateCommand },
        unsafe { raw::RedisModule_GetCommand },
        unsafe { raw::RedisModule_SetCommandInfo },
    ) else {
        return Err("the server lacks the command registration API (Redis 7.0+ needed)".into());
    };
    let name = CString::new(c.name).map_err(|e| e.to_string())?;
    let flags = CString::new(c.flags).map_err(|e| e.to_string())?;
    let last = c.keys.len() as c_int;
    if unsafe {
        create(
            ctx,
            name.as_ptr(),
            Some(c.handler),
            flags.as_ptr(),
            1,
            last,
            1,
        )
    } != raw::REDISMODULE_OK as c_int
    {
        return Err("RedisModule_CreateCommand failed".into());
    }
    let command = unsafe { get(ctx, name.as_ptr()) };
    if command.is_null() {
        return Err("RedisModule_GetCommand failed".into());
    }
    let specs: Vec<KeySpec> = c
        .keys
        .iter()
        .enumerate()
        .map(|(i, f)| {
            KeySpec::new(
                None,
                KeySpecFlags::from_bits_truncate(f.bits()),
                BeginSearch::new_index(i as i32 + 1),
                FindKeys::new_range(0, 1, 0),
            )
        })
        .collect();
    let key_specs = get_redis_key_spec(specs);
    let summary = CString::new(c.summary).map_err(|e| e.to_string())?;
    let complexity = CString::new(c.complexity).map_err(|e| e.to_string())?;
    let since = c"0.1.0";
    let info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null::<c_char>(),
        arity: c.arity,
        key_specs: key_specs.as_ptr() as *mut raw::RedisModuleCommandKeySpec,
        args: ptr::null_mut(),
    };
    if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
        return Err("RedisModule_SetCommandInfo refused the key specs".into());
    }
    Ok(())
}
