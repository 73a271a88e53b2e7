//! Closed sets of named options (colour maps, figures, JSON sections, …).
//!
//! Each option type of the library (defined next to the code that uses it) lists its values with
//! the name a user types and a one-line description. Any front end parses and lists them through
//! this one trait: the command line builds its `--help` and its value parsers from it (in the
//! application layer, the only code that knows clap), and a notebook API can accept the same
//! names.

/// A closed set of named values.
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value, in the order help text lists them.
    const ALL: &'static [Self];

    /// The name a user types (`viridis`), unique within the set, lower case.
    fn name(self) -> &'static str;

    /// One line on what the value does, for help text.
    fn describe(self) -> &'static str;

    /// The value named `name` (case-insensitive), if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Every name, comma-separated, for error messages.
    fn names() -> String {
        Self::ALL
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Implement [`Choice`] for a fieldless enum from `Variant => ("name", "description")` lines.
#[macro_export]
#[doc(hidden)]
macro_rules! choice {
    ($ty:ty { $($variant:ident => ($name:literal, $describe:literal)),+ $(,)? }) => {
        impl $crate::choice::Choice for $ty {
            const ALL: &'static [Self] = &[$(<$ty>::$variant),+];
            fn name(self) -> &'static str {
                match self { $(<$ty>::$variant => $name),+ }
            }
            fn describe(self) -> &'static str {
                match self { $(<$ty>::$variant => $describe),+ }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Choice;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Demo {
        One,
        Two,
    }
    crate::choice!(Demo {
        One => ("one", "the first"),
        Two => ("two", "the second"),
    });

    #[test]
    fn names_round_trip_case_insensitively() {
        for &v in Demo::ALL {
            assert_eq!(Demo::from_name(v.name()), Some(v));
        }
        assert_eq!(Demo::from_name(" TWO "), Some(Demo::Two));
        assert_eq!(Demo::from_name("three"), None);
        assert_eq!(Demo::names(), "one, two");
        assert_eq!(Demo::One.describe(), "the first");
    }
}
