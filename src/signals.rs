//! Ctrl-C and SIGTERM during a run: the first asks the run to stop through its [`Interrupt`]
//! (running probes stopped, scratch resources dropped, the report written); a second one kills
//! the course's services and ends the process at once. A SIGINT the process was started to
//! ignore (a background job of a shell without job control) stays ignored, as shells expect.

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::run::{Interrupt, Interruption};

/// Turns SIGINT and SIGTERM into requests on `interrupt` for the rest of the process's life.
pub fn watch(interrupt: &Interrupt) -> std::io::Result<()> {
    for (signal, why) in [
        (SIGINT, Interruption::Interrupt),
        (SIGTERM, Interruption::Terminate),
    ] {
        if signal == SIGINT && ignored(signal) {
            continue;
        }
        let interrupt = interrupt.clone();
        let action = move || {
            if interrupt.requested().is_some() {
                let message = b"lessonprobe: interrupted again: exiting now\n";
                // SAFETY: write(2) is async-signal-safe; the buffer is valid for its length.
                unsafe { libc::write(2, message.as_ptr().cast(), message.len()) };
                // The course's services run in process groups of their own: no signal of the
                // terminal reaches them, so they go before the process does.
                crate::services::kill_all_now();
                signal_hook::low_level::exit(128 + signal);
            }
            interrupt.request(why);
        };
        // SAFETY: the action only loads and stores atomics, writes to stderr, sends signals to
        // the services' process groups and calls _exit, all of which may be done in a signal
        // handler.
        unsafe { signal_hook::low_level::register(signal, action) }?;
    }
    Ok(())
}

/// Whether `signal` is ignored (SIG_IGN) in this process.
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}
