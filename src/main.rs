//! The `lessonprobe` binary: everything lives in the library.

// Batches are read and decoded on one thread and written, looked up or counted on another:
// mimalloc frees across threads without the arena locks glibc's allocator takes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    lessonprobe::main()
}
