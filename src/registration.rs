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
    /// Flags of the key spec of each key, in argument order from index 1;
    /// with `numkeys`, the flags of every key of the one key-count spec.
    keys: &'static [KeySpecFlags],
    /// `numkeys key [key ...]` from index 1, as `EVAL` declares its keys.
    numkeys: bool,
    /// ACL categories where the server has them (Redis 7.2+, Valkey 8+); the
    /// module's own `ratelimit` category is added to these when it exists.
    acl: &'static str,
    summary: &'static str,
    complexity: &'static str,
}

const RW_UPDATE: KeySpecFlags = KeySpecFlags::READ_WRITE
    .union(KeySpecFlags::ACCESS)
    .union(KeySpecFlags::UPDATE);

/// No command is flagged `deny-oom`: the writing commands apply Redis's OOM
/// rule themselves after their argument checks, so that refunds (and lease
/// releases), which only shrink state, still run above `maxmemory` (SPEC
/// "Memory"; `CallContext::refuse_if_oom`).
const COMMANDS: &[Command] = &[
    Command {
        name: "rl.check",
        handler: commands::rl_check,
        flags: "write",
        arity: -5,
        numkeys: false,
        keys: &[RW_UPDATE],
        acl: "write sortedset slow",
        summary: "Sliding-window log check against one or more rules; admits (and records) or rejects atomically, refunds (REFUND), or records usage known after the fact (DEBIT, never refused).",
        complexity: "O(R log N + C + M): R distinct windows (at most 64), N members, C the cost (at most 10000), M members trimmed or refunded; worst case a trim of a whole large set.",
    },
    Command {
        name: "rl.peek",
        handler: commands::rl_peek,
        // Not `fast`: up to 64 rules, each a count over a large set.
        flags: "readonly",
        arity: -5,
        numkeys: false,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        acl: "read sortedset slow",
        summary: "What RL.CHECK would answer now, without writing anything; COST 0 answers the state now.",
        complexity: "O(R log N): R distinct windows (at most 64), N members.",
    },
    Command {
        name: "rl.dayhour",
        handler: commands::rl_dayhour,
        flags: "write fast",
        arity: 7,
        numkeys: false,
        keys: &[RW_UPDATE, RW_UPDATE],
        acl: "write string fast",
        summary: "Two fixed-window counters (day and hour) that admit and count together, or not at all.",
        complexity: "O(1)",
    },
    Command {
        name: "rl.lockcount",
        handler: commands::rl_lockcount,
        flags: "write fast",
        arity: 6,
        numkeys: false,
        keys: &[
            // ACCESS: a locked call returns the lock's TTL.
            KeySpecFlags::READ_WRITE.union(KeySpecFlags::ACCESS).union(KeySpecFlags::INSERT),
            KeySpecFlags::READ_WRITE.union(KeySpecFlags::ACCESS).union(KeySpecFlags::UPDATE),
        ],
        acl: "write string fast",
        summary: "Count requests in a fixed window; past the maximum, set a lock key that rejects until it expires.",
        complexity: "O(1)",
    },
    Command {
        name: "rl.throttle",
        handler: commands::rl_throttle,
        flags: "write fast",
        arity: -6,
        numkeys: false,
        keys: &[RW_UPDATE],
        acl: "write hash fast",
        summary: "Token bucket (GCRA) against one or more (burst, count, window) rules; admits and records, rejects, refunds (REFUND), debits (DEBIT) or reserves a later slot (RESERVE max_wait) atomically. O(1) memory per rule.",
        complexity: "O(R) for R rules (at most 64): one hash field read and written per rule.",
    },
    Command {
        name: "rl.throttlepeek",
        handler: commands::rl_throttlepeek,
        flags: "readonly fast",
        arity: -6,
        numkeys: false,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        acl: "read hash fast",
        summary: "What RL.THROTTLE would answer now (with RESERVE: the reservation), without writing anything; COST 0 answers the state now.",
        complexity: "O(R) for R rules (at most 64).",
    },
    Command {
        name: "rl.quota",
        handler: commands::rl_quota,
        flags: "write fast",
        arity: -6,
        numkeys: false,
        keys: &[RW_UPDATE],
        acl: "write hash fast",
        summary: "Calendar quotas (minute to year) in a time zone; admits and counts in every period, rejects, refunds (REFUND) or debits (DEBIT) atomically.",
        complexity: "O(P + F): P periods (at most 6), F fields of the hash scanned for stale buckets (only when it holds more than the current buckets and at most 64 fields).",
    },
    Command {
        name: "rl.quotapeek",
        handler: commands::rl_quotapeek,
        flags: "readonly fast",
        arity: -6,
        numkeys: false,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        acl: "read hash fast",
        summary: "What RL.QUOTA would answer now, without writing anything; COST 0 answers the state now.",
        complexity: "O(P): P periods (at most 6).",
    },
    Command {
        name: "rl.lease",
        handler: commands::rl_lease,
        // Not `fast`: a reap of expired units, or a large COST.
        flags: "write",
        arity: -5,
        numkeys: false,
        keys: &[RW_UPDATE],
        acl: "write sortedset slow",
        summary: "Takes (or renews, or resizes) a lease of COST units under a concurrency limit; units expire ttl ms after now unless renewed or released.",
        complexity: "O(log N + C + U + M): N members, C the cost (at most 10000), U the token's units before the call, M expired units removed (when the expiry moves, or when limit or more have expired).",
    },
    Command {
        name: "rl.leasepeek",
        handler: commands::rl_leasepeek,
        flags: "readonly fast",
        arity: -4,
        numkeys: false,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        acl: "read sortedset fast",
        summary: "What RL.LEASE would answer now (without the token), without writing anything.",
        complexity: "O(log N + U): N members, U the token's units.",
    },
    Command {
        name: "rl.release",
        handler: commands::rl_release,
        flags: "write",
        arity: -4,
        numkeys: false,
        keys: &[KeySpecFlags::READ_WRITE
            .union(KeySpecFlags::ACCESS)
            .union(KeySpecFlags::DELETE)],
        acl: "write sortedset slow",
        summary: "Gives leases back; answers per token the live units released (0: the lease was lost).",
        complexity: "O(T + U log N): T tokens (at most 64), U their units, N members.",
    },
    Command {
        name: "rl.renew",
        handler: commands::rl_renew,
        flags: "write",
        arity: -5,
        numkeys: false,
        keys: &[RW_UPDATE],
        acl: "write sortedset slow",
        summary: "Extends leases that are still live to ttl ms after now; answers per token the units renewed (0: the lease is lost, never revived).",
        complexity: "O(T + U log N): T tokens (at most 64), U their units, N members.",
    },
    Command {
        name: "rl.all",
        handler: commands::rl_all,
        // Not `fast`: up to 64 rules over its clauses, each as costly as
        // its command.
        // `getkeys-api`: Redis 7.0's Cluster routing asks the command for
        // its movable keys (`commands::answer_keys_request`).
        flags: "write getkeys-api",
        arity: -5,
        numkeys: true,
        keys: &[RW_UPDATE],
        acl: "write sortedset hash slow",
        summary: "One all-or-nothing decision over several keys, each under one limiter clause (CHECK, THROTTLE, QUOTA, LEASE): admits and records in every clause only when every clause admits; refunds every clause (REFUND); DETAILS adds every rule's own state to the reply.",
        complexity: "The sum of its clauses' complexities (at most 64 keys and 64 rules).",
    },
    Command {
        name: "rl.allpeek",
        handler: commands::rl_allpeek,
        flags: "readonly getkeys-api",
        arity: -5,
        numkeys: true,
        keys: &[KeySpecFlags::READ_ONLY.union(KeySpecFlags::ACCESS)],
        acl: "read sortedset hash slow",
        summary: "What RL.ALL would answer now, without writing anything; COST 0 answers a clause's state now; DETAILS adds every rule's own state.",
        complexity: "The sum of its clauses' peeks' complexities (at most 64 keys and 64 rules).",
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
    // A core command (Valkey has proposed an `RL.THROTTLE`) or another
    // module's may already hold one of our names: refuse the load before
    // registering anything, naming it, rather than fail halfway through.
    for c in COMMANDS {
        let name = CString::new(c.name).map_err(|e| e.to_string())?;
        if command_exists(ctx, &name).map_err(|e| e.reply_text())? {
            return Err(format!(
                "the server already has a command named '{}' (a core command or another module's); the module registers none of its commands and does not load",
                c.name
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
    let own_category = add_own_acl_category(ctx);
    for c in COMMANDS {
        register_one(ctx, c, own_category).map_err(|e| format!("{}: {e}", c.name))?;
    }
    Ok(())
}

/// The module's own ACL category, `@ratelimit`.
pub const ACL_CATEGORY: &str = "ratelimit";

/// Whether `@ratelimit` can be used: the server has
/// `RedisModule_AddACLCategory` (Redis 7.2+, Valkey 8+; not Redis 7.0) and the
/// category exists. A category outlives `MODULE UNLOAD`, so after a reload
/// the add fails as a duplicate while the category is there to use. The
/// function pointer is looked up at load time, so one build loads everywhere.
fn add_own_acl_category(ctx: *mut raw::RedisModuleCtx) -> bool {
    let Some(add) = (unsafe { raw::RedisModule_AddACLCategory }) else {
        return false;
    };
    let Ok(name) = CString::new(ACL_CATEGORY) else {
        return false;
    };
    // Err on a reload (the category exists already): use it all the same.
    unsafe { add(ctx, name.as_ptr()) };
    true
}

/// Puts a command in its ACL categories where the server has
/// `RedisModule_SetCommandACLCategories`; a no-op on Redis 7.0 (README
/// "Security" gives the rule that closes the gap there).
fn set_acl_categories(
    command: *mut raw::RedisModuleCommand,
    c: &Command,
    own_category: bool,
) -> Result<(), String> {
    let Some(set_categories) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return Ok(());
    };
    let set = |categories: String| -> Result<(), String> {
        let categories = CString::new(categories).map_err(|e| e.to_string())?;
        if unsafe { set_categories(command, categories.as_ptr()) } == raw::REDISMODULE_OK as c_int {
            Ok(())
        } else {
            Err(format!(
                "RedisModule_SetCommandACLCategories refused '{}'",
                categories.to_string_lossy()
            ))
        }
    };
    // Without `@ratelimit` if the server would not add it: the standard
    // categories are the ones that hold `-@write` and `-@read`.
    if own_category && set(format!("{} {ACL_CATEGORY}", c.acl)).is_ok() {
        return Ok(());
    }
    set(c.acl.to_string())?;
    Ok(())
}

fn register_one(
    ctx: *mut raw::RedisModuleCtx,
    c: &Command,
    own_category: bool,
) -> Result<(), String> {
    let (Some(create), Some(get), Some(set_info)) = (
        unsafe { raw::RedisModule_CreateCommand },
        unsafe { raw::RedisModule_GetCommand },
        unsafe { raw::RedisModule_SetCommandInfo },
    ) else {
        return Err("the server lacks the command registration API (Redis 7.0+ needed)".into());
    };
    let name = CString::new(c.name).map_err(|e| e.to_string())?;
    let flags = CString::new(c.flags).map_err(|e| e.to_string())?;
    // Key-count commands declare their keys by the key spec alone.
    let (first, last, step) = if c.numkeys {
        (0, 0, 0)
    } else {
        (1, c.keys.len() as c_int, 1)
    };
    if unsafe {
        create(
            ctx,
            name.as_ptr(),
            Some(c.handler),
            flags.as_ptr(),
            first,
            last,
            step,
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
            let find = if c.numkeys {
                // numkeys at index 1, the keys right after it, one by one.
                FindKeys::new_keys_num(0, 1, 1)
            } else {
                FindKeys::new_range(0, 1, 0)
            };
            KeySpec::new(
                None,
                KeySpecFlags::from_bits_truncate(f.bits()),
                BeginSearch::new_index(i as i32 + 1),
                find,
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
    set_acl_categories(command, c, own_category)
}
