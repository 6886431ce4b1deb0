//! What the benchmarks share: their numeric settings, read from the environment.

/// The whole number in the variable `name` (`_` allowed between digits, as in `1_000_000`), or
/// `default` when it is not set. A value that is not a whole number stops the benchmark with a
/// message naming it, rather than measuring something else than was asked.
pub fn setting(name: &str, default: usize) -> usize {
    read(name, std::env::var(name).ok(), default)
}

fn read(name: &str, value: Option<String>, default: usize) -> usize {
    match value {
        None => default,
        Some(value) => value.replace('_', "").parse().unwrap_or_else(|_| {
            panic!("{name}={value}: a whole number is needed (for example 1000000 or 1_000_000)")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_gives_the_default_and_underscores_are_allowed() {
        assert_eq!(read("N", None, 7), 7);
        assert_eq!(read("N", Some("3_000_000".into()), 1), 3_000_000);
    }

    #[test]
    #[should_panic(expected = "LESSONPROBE_BENCH_EVENTS=3M: a whole number is needed")]
    fn a_value_that_is_not_a_whole_number_is_refused_by_name() {
        read("LESSONPROBE_BENCH_EVENTS", Some("3M".into()), 1);
    }
}
