//! Log callbacks: a Rust closure behind the C `ds_log_fn`. The closure runs
//! under `catch_unwind`, so a panic never unwinds into the library (the
//! header forbids it); a panicking closure loses that one message.
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Severity of a library message (`DS_LOG_*`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    pub(crate) fn code(self) -> i32 {
        match self {
            LogLevel::Off => deepspeed_c_sys::DS_LOG_OFF,
            LogLevel::Error => deepspeed_c_sys::DS_LOG_ERROR,
            LogLevel::Warn => deepspeed_c_sys::DS_LOG_WARN,
            LogLevel::Info => deepspeed_c_sys::DS_LOG_INFO,
            LogLevel::Debug => deepspeed_c_sys::DS_LOG_DEBUG,
        }
    }

    /// The level of a DS_LOG_* code; codes above DEBUG read as Debug.
    pub(crate) fn from_code(code: i32) -> LogLevel {
        match code {
            i32::MIN..=0 => LogLevel::Off,
            1 => LogLevel::Error,
            2 => LogLevel::Warn,
            3 => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

/// The boxed closure; its address is the C callback's user_data, so it lives
/// in a Box owned by the engine until after ds_engine_destroy.
pub(crate) type LogClosure = dyn Fn(LogLevel, &str) + Send + Sync + 'static;
pub(crate) struct LogSink(pub(crate) Box<LogClosure>);

/// The C side of every Rust log closure.
pub(crate) unsafe extern "C" fn trampoline(level: i32, message: *const c_char, user_data: *mut c_void) {
    if user_data.is_null() {
        return;
    }
    let sink = &*(user_data as *const LogSink);
    let text = if message.is_null() { Default::default() } else { CStr::from_ptr(message).to_string_lossy() };
    // Never unwind into C: a panic in the closure is caught and dropped here.
    let _ = catch_unwind(AssertUnwindSafe(|| (sink.0)(LogLevel::from_code(level), &text)));
}

/// Route every message no engine's own log closure takes (communicators and
/// their watchdog threads, checkpoint cleanup, engines built without
/// [`EngineBuilder::log`](crate::EngineBuilder::log)) to `f`; `None`
/// restores the default (stderr). Levels still filter first. The closure may
/// run on any thread, several at once; panics are caught.
///
/// The library may still be finishing a call to the previous sink when this
/// returns, so a replaced closure is never freed: each call leaks one small
/// box. Set it once at start-up.
pub fn set_log_callback<F: Fn(LogLevel, &str) + Send + Sync + 'static>(f: Option<F>) {
    match f {
        Some(f) => {
            let sink: &'static LogSink = Box::leak(Box::new(LogSink(Box::new(f))));
            unsafe { deepspeed_c_sys::ds_set_log_callback(Some(trampoline), sink as *const LogSink as *mut c_void) };
        }
        None => unsafe { deepspeed_c_sys::ds_set_log_callback(None, std::ptr::null_mut()) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::sync::{Arc, Mutex};

    #[test]
    fn trampoline_delivers_and_contains_panics() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        let sink = LogSink(Box::new(move |lvl, msg| {
            seen.lock().unwrap().push((lvl, msg.to_string()));
            if msg == "boom" {
                panic!("a log closure panicked");
            }
        }));
        let user = &sink as *const LogSink as *mut c_void;
        let hello = CString::new("hello").unwrap();
        let boom = CString::new("boom").unwrap();
        unsafe {
            trampoline(2, hello.as_ptr(), user);
            trampoline(1, boom.as_ptr(), user); // must return normally
            trampoline(9, hello.as_ptr(), user);
        }
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (LogLevel::Warn, "hello".to_string()));
        assert_eq!(got[1].0, LogLevel::Error);
        assert_eq!(got[2].0, LogLevel::Debug);
    }
}
