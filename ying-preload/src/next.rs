//! The definitions this library stands in front of: a function's definition next after this library's, looked up
//! once with `dlsym(RTLD_NEXT)` and kept.

use core::ffi::CStr;
use core::sync::atomic::{AtomicUsize, Ordering};

/// A function's address, looked up once (0: not yet).
pub(crate) struct Next {
    name: &'static CStr,
    address: AtomicUsize,
}

impl Next {
    /// The definition of `name` next after this library's.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self { name, address: AtomicUsize::new(0) }
    }

    /// Its address, when the loaded objects define it after this library.
    pub(crate) fn address(&self) -> Option<usize> {
        let mut address = self.address.load(Ordering::Acquire);
        if address == 0 {
            // SAFETY: `dlsym` with `RTLD_NEXT` and a NUL-terminated name; it returns null or the function's address.
            address = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
            self.address.store(address, Ordering::Release);
        }
        (address != 0).then_some(address)
    }
}
