//! SQLite's `lower()` made Unicode-aware. SQLite's own folds only ASCII letters (without its ICU
//! extension), so the management API's `*_IGNORE_CASE` text queries, which compare `lower(column)`
//! with a value lowercased in Rust, missed every name with a non-ASCII capital ("MÜLLER" against
//! "Müller"). PostgreSQL's `lower()` folds Unicode already (with a UTF-8 locale, as here). The
//! function replaces the built-in one on every connection latch opens
//! ([`super::sqlite_busy::install`] registers both); no index or stored value depends on it.

use std::ffi::c_int;
use std::ptr;

use libsqlite3_sys as ffi;

/// `lower(x)`: NULL for NULL, otherwise the text of `x` lowercased one character at a time
/// ([`super::lower_chars`], Unicode's case mapping, as PostgreSQL's `lower()`).
unsafe extern "C" fn lower(ctx: *mut ffi::sqlite3_context, argc: c_int, argv: *mut *mut ffi::sqlite3_value) {
    // SAFETY: SQLite calls this with a valid context and `argc` valid values; the text pointer
    // it gives stays valid until the value is changed or the function returns, and is copied
    // (SQLITE_TRANSIENT) before that.
    unsafe {
        let value = if argc == 1 { *argv } else { ptr::null_mut() };
        if value.is_null() || ffi::sqlite3_value_type(value) == ffi::SQLITE_NULL {
            ffi::sqlite3_result_null(ctx);
            return;
        }
        let text = ffi::sqlite3_value_text(value);
        let len = ffi::sqlite3_value_bytes(value);
        if text.is_null() {
            ffi::sqlite3_result_null(ctx);
            return;
        }
        let bytes = std::slice::from_raw_parts(text, usize::try_from(len).unwrap_or(0));
        let folded = super::lower_chars(&String::from_utf8_lossy(bytes));
        match c_int::try_from(folded.len()) {
            Ok(n) => ffi::sqlite3_result_text(ctx, folded.as_ptr().cast(), n, ffi::SQLITE_TRANSIENT()),
            Err(_) => ffi::sqlite3_result_error_toobig(ctx),
        }
    }
}

/// Registers [`lower`] on connection `db`, replacing SQLite's built-in one.
///
/// # Safety
/// `db` must be a connection being opened (an auto-extension's argument).
pub(super) unsafe fn register(db: *mut ffi::sqlite3) -> c_int {
    // SAFETY: the caller passes a valid connection.
    unsafe {
        ffi::sqlite3_create_function_v2(
            db,
            c"lower".as_ptr(),
            1,
            ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC | ffi::SQLITE_INNOCUOUS,
            ptr::null_mut(),
            Some(lower),
            None,
            None,
            None,
        )
    }
}
