//! The commands' lines on standard output and standard error, never a panic: `println!`
//! panicked when a line could not be written, and the unwinding dropped whatever the command
//! held. A reader gone (`| head`) is no error: the rest of the output is dropped and the command
//! carries on, as the run's reporters do. Any other failure to write standard output (a full
//! disk) is kept, and the program's end says it and exits 3 where it would have exited 0.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};
use std::sync::OnceLock;

/// The first failure to write standard output other than a reader gone.
static UNWRITTEN: OnceLock<String> = OnceLock::new();

/// Writes `text` to standard output (see the module's header).
pub fn out(text: Arguments<'_>) {
    keep_failure(std::io::stdout().lock().write_fmt(text));
}

fn keep_failure(written: std::io::Result<()>) {
    if let Err(e) = written {
        if e.kind() != ErrorKind::BrokenPipe {
            let _ = UNWRITTEN.set(e.to_string());
        }
    }
}

/// Writes `text` to standard error, or nothing when it cannot be written: there is nowhere
/// left to say so.
pub fn err(text: Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(text);
}

/// Flushes standard output; why it could not all be written, other than its reader gone.
pub fn unwritten() -> Option<&'static str> {
    keep_failure(std::io::stdout().lock().flush());
    UNWRITTEN.get().map(String::as_str)
}

/// `print!` that never panics (see [`out`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::console::out(format_args!($($arg)*)) };
}

/// `println!` that never panics (see [`out`]).
macro_rules! outln {
    () => { $crate::console::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics (see [`err`]).
macro_rules! errln {
    () => { $crate::console::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::err(format_args!("{}\n", format_args!($($arg)*))) };
}
