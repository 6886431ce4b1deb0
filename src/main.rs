//! The `lessonprobe` binary: everything lives in the library.

// Batches are read and decoded on one thread and written, looked up or counted on another:
// mimalloc frees across threads without the arena locks glibc's allocator takes. It is built
// with `no_thp` (Cargo.toml): asked for transparent huge pages, its arenas' first touches each
// zeroed 2 MiB, 37 ms of CPU on the thread walking a 20,000-file course before the first probe.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    limit_c_arenas();
    lessonprobe::main()
}

/// The C libraries (librdkafka, SQLite, libpq's peers) still allocate through glibc, which gives
/// each new thread an arena of its own, up to eight per core, and keeps what each one freed:
/// with `--jobs 2` a replay held 340 MiB, 95 MiB of it its own. Two arenas keep it near 236 MiB
/// and no slower. Set before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_c_arenas() {
    // SAFETY: mallopt only changes glibc's allocator tuning; no thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_c_arenas() {}
