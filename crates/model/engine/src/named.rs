//! Enums read from their names on the command line and in files.

/// An enum read from its name (`--batching static`), with the names in the error.
pub trait Named: Sized + Copy + 'static {
    const NAMES: &'static [(Self, &'static str)];

    fn name(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::NAMES.iter().find(|(v, _)| *v == self).map_or("?", |(_, n)| n)
    }

    fn from_name(s: &str) -> Result<Self, String> {
        Self::NAMES.iter().find(|(_, n)| *n == s.trim()).map(|(v, _)| *v).ok_or_else(|| {
            let names: Vec<&str> = Self::NAMES.iter().map(|(_, n)| *n).collect();
            format!("`{s}`: expected {}", names.join(", "))
        })
    }
}
