//! The `lessonprobe` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    lessonprobe::main()
}
