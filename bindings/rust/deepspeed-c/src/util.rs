//! Small conversions shared by the modules.
use crate::error::{Error, Result, Status};
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A C string of `s`; Err(InvalidArgument) naming `what` if it holds a NUL byte.
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, format!("{} {:?} contains a NUL byte", what, s)))
}

pub(crate) fn cpath(p: &Path, what: &str) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::new(Status::InvalidArgument, format!("{} {:?} contains a NUL byte", what, p)))
}

pub(crate) fn opt_cstring(s: Option<&str>, what: &str) -> Result<Option<CString>> {
    s.map(|s| cstring(s, what)).transpose()
}

pub(crate) fn ptr_or_null(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// An owned copy of library text (NULL reads as "").
pub(crate) fn owned(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
