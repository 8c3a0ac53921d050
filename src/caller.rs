//! The caller's `search_path`, read inside a function that pins its own.
//!
//! `grid.ask()`, `grid.run()` and `grid.explain()` run with `SET search_path =
//! pg_catalog, pg_temp` like every grid function, so nothing they run resolves a name
//! through a schema the caller controls. Yet what the caller reaches unqualified is part
//! of the question: the catalog snapshot offers relations on the caller's path bare and
//! the others qualified, and `grid.run()` runs the generated statement under that path.
//! The value is the one the function's `SET` clause saved on entry: PostgreSQL keeps it
//! on the parameter's GUC stack, at the nesting level the clause opened, until the
//! function returns.

use std::ffi::CStr;

use pgrx::pg_sys;

/// What the function's `SET search_path` clause saved, if the top of the parameter's GUC
/// stack is that clause's entry; otherwise (the function runs without the clause) the
/// current value, which is then the caller's own.
pub fn search_path() -> String {
    // SAFETY: a backend's main thread; the GUC table and its stacks are only read, and
    // the nesting level opened here is closed at once with nothing set inside it.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::AtEOXact_GUC(true, level);
        // The level of the function's own SET clause: the one below the level just
        // opened.
        let function_level = level - 1;
        if let Some(saved) = saved_at("search_path", function_level) {
            return saved;
        }
    }
    current("search_path")
}

/// The value saved at `level` on the stack of parameter `name`, when the stack's top
/// entry was made at that level.
///
/// # Safety
/// A backend's main thread, with the GUC table built.
unsafe fn saved_at(name: &str, level: i32) -> Option<String> {
    let name = std::ffi::CString::new(name).ok()?;
    let var = crate::pgversion::guc_variable(&name);
    if var.is_null() || (*var).vartype != pg_sys::config_type::PGC_STRING {
        return None;
    }
    let top = (*var).stack;
    if top.is_null() || (*top).nest_level != level {
        return None;
    }
    let saved = (*top).prior.val.stringval;
    if saved.is_null() {
        return None;
    }
    Some(CStr::from_ptr(saved).to_string_lossy().into_owned())
}

/// The current value of parameter `name` (empty when it has none).
fn current(name: &str) -> String {
    let Ok(name) = std::ffi::CString::new(name) else {
        return String::new();
    };
    // SAFETY: a backend's main thread; GetConfigOption returns a pointer into the GUC
    // table (or null with missing_ok), copied before anything can change it.
    unsafe {
        let v = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        if v.is_null() {
            String::new()
        } else {
            CStr::from_ptr(v).to_string_lossy().into_owned()
        }
    }
}
