//! Statuses and errors: every failing call gives an [`Error`] carrying the
//! status code and the library's message (`ds_last_error`), read on the
//! calling thread right after the call.
use deepspeed_c_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// A failure status of the C ABI (`DS_ERR_*`). New codes may appear in later
/// versions; a code this crate does not know is `Unknown(code)`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    InvalidHandle,
    InvalidState,
    InvalidConfig,
    Unsupported,
    NotFound,
    OutOfMemory,
    DeviceOutOfMemory,
    Device,
    Comm,
    Timeout,
    Io,
    Format,
    AbiMismatch,
    Internal,
    Unknown(i32),
}

impl Status {
    /// The status of a non-zero code.
    pub fn from_code(code: i32) -> Status {
        match code {
            sys::DS_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::DS_ERR_INVALID_HANDLE => Status::InvalidHandle,
            sys::DS_ERR_INVALID_STATE => Status::InvalidState,
            sys::DS_ERR_INVALID_CONFIG => Status::InvalidConfig,
            sys::DS_ERR_UNSUPPORTED => Status::Unsupported,
            sys::DS_ERR_NOT_FOUND => Status::NotFound,
            sys::DS_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::DS_ERR_DEVICE_OUT_OF_MEMORY => Status::DeviceOutOfMemory,
            sys::DS_ERR_DEVICE => Status::Device,
            sys::DS_ERR_COMM => Status::Comm,
            sys::DS_ERR_TIMEOUT => Status::Timeout,
            sys::DS_ERR_IO => Status::Io,
            sys::DS_ERR_FORMAT => Status::Format,
            sys::DS_ERR_ABI_MISMATCH => Status::AbiMismatch,
            sys::DS_ERR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        }
    }

    /// The C code (`DS_ERR_*`).
    pub fn code(self) -> i32 {
        match self {
            Status::InvalidArgument => sys::DS_ERR_INVALID_ARGUMENT,
            Status::InvalidHandle => sys::DS_ERR_INVALID_HANDLE,
            Status::InvalidState => sys::DS_ERR_INVALID_STATE,
            Status::InvalidConfig => sys::DS_ERR_INVALID_CONFIG,
            Status::Unsupported => sys::DS_ERR_UNSUPPORTED,
            Status::NotFound => sys::DS_ERR_NOT_FOUND,
            Status::OutOfMemory => sys::DS_ERR_OUT_OF_MEMORY,
            Status::DeviceOutOfMemory => sys::DS_ERR_DEVICE_OUT_OF_MEMORY,
            Status::Device => sys::DS_ERR_DEVICE,
            Status::Comm => sys::DS_ERR_COMM,
            Status::Timeout => sys::DS_ERR_TIMEOUT,
            Status::Io => sys::DS_ERR_IO,
            Status::Format => sys::DS_ERR_FORMAT,
            Status::AbiMismatch => sys::DS_ERR_ABI_MISMATCH,
            Status::Internal => sys::DS_ERR_INTERNAL,
            Status::Unknown(code) => code,
        }
    }

    /// The library's text for the status ("DS_ERR_INVALID_CONFIG: invalid configuration").
    pub fn text(self) -> String {
        unsafe { CStr::from_ptr(sys::ds_status_string(self.code())) }.to_string_lossy().into_owned()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// A failed call: the status and the message naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    /// An error raised by this crate before the C library was called.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// The error of a failed call with `code`, taking the thread's ds_last_error().
    pub(crate) fn last(code: i32) -> Error {
        let message = unsafe { CStr::from_ptr(sys::ds_last_error()) }.to_string_lossy().into_owned();
        Error { status: Status::from_code(code), message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Ok for DS_OK, else the error with this thread's last message.
pub(crate) fn check(code: sys::ds_status_t) -> Result<()> {
    if code == sys::DS_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 1..=15 {
            let s = Status::from_code(code);
            assert_ne!(s, Status::Unknown(code), "code {} has no variant", code);
            assert_eq!(s.code(), code);
        }
        assert_eq!(Status::from_code(99), Status::Unknown(99));
        assert_eq!(Status::Unknown(99).code(), 99);
    }

    #[test]
    fn display_names_status_and_message() {
        let e = Error::new(Status::InvalidConfig, "optimizer.params.lrr: unknown key");
        let text = e.to_string();
        assert!(text.starts_with("DS_ERR_INVALID_CONFIG"), "{}", text);
        assert!(text.ends_with("optimizer.params.lrr: unknown key"), "{}", text);
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.to_string().contains("lrr"));
    }
}
