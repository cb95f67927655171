//! The `INFO ratelimit` section (also in `INFO modules` / `INFO everything`).
//! Redis prefixes each field with the module name: `ratelimit_check_calls`.

use std::ffi::CString;
use std::ptr;

use redis_module::{raw, InfoContext};

use crate::limiters::calendar::buckets as calendar;
use crate::stats;
use crate::version;

pub fn add_info(ctx: &InfoContext, _for_crash_report: bool) {
    let (Some(section), Some(field), Some(text)) = (
        unsafe { raw::RedisModule_InfoAddSection },
        unsafe { raw::RedisModule_InfoAddFieldULongLong },
        unsafe { raw::RedisModule_InfoAddFieldCString },
    ) else {
        return;
    };
    // NULL: the module's own section, named after the module.
    unsafe { section(ctx.ctx, ptr::null_mut()) };
    // The module's release first (MODULE LIST shows it only as a number, 200
    // for 0.2.0), so a crash report or an INFO dump says which build ran.
    if let Ok(release) = CString::new(version::TEXT) {
        unsafe { text(ctx.ctx, c"version".as_ptr(), release.as_ptr()) };
    }
    for s in stats::EVERY {
        for (name, value) in s.fields() {
            if let Ok(name) = CString::new(name) {
                unsafe { field(ctx.ctx, name.as_ptr(), value) };
            }
        }
    }
    // The IANA time-zone database RL.QUOTA's buckets come from.
    if let Ok(tzdb) = CString::new(calendar::tzdb_version()) {
        unsafe { text(ctx.ctx, c"tzdb_version".as_ptr(), tzdb.as_ptr()) };
    }
}
