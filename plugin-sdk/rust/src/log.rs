//! Logging through the host's optional `arbiter.log` import. The host keeps
//! at most 64 lines and 4 KiB per call and counts what it drops. Off
//! WebAssembly (a plugin's unit tests on the build machine) lines go to
//! stderr instead.

/// Severity of a log line, as the ABI numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

/// Writes one line to the host's log.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        #[link(wasm_import_module = "arbiter")]
        unsafe extern "C" {
            #[link_name = "log"]
            fn arbiter_log(level: i32, ptr: i32, len: i32);
        }
        let len = i32::try_from(message.len()).unwrap_or(i32::MAX);
        // SAFETY: the host reads `len` bytes at `ptr`, which lie inside
        // `message` in this module's memory.
        unsafe { arbiter_log(level as i32, message.as_ptr() as i32, len) }
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("arbiter.log {level:?}: {message}");
}
