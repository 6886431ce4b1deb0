//! The built-in probes by name.

use crate::checks;
use crate::context::BuiltinProbe;

/// Every built-in probe.
pub fn builtins() -> &'static [BuiltinProbe] {
    checks::ALL
}

pub fn builtin(name: &str) -> Option<&'static BuiltinProbe> {
    builtins().iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = super::builtins().iter().map(|p| p.name).collect();
        let before = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), before);
    }
}
