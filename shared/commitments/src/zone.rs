//! The tenant time zone (RFC 0068 commitments are "relative to the entry's createdAt and a tenant
//! time zone, UTC by default").
//!
//! Crate choice: `chrono-tz`. The workspace already speaks `chrono`; `chrono-tz` 0.10 ships the
//! IANA database as prebuilt Rust tables (no build script unless `case-insensitive` or
//! `filter-by-regex` is enabled, both of which we leave off), so every host — a developer
//! laptop, CI, a Lambda without `/usr/share/zoneinfo` — resolves the same local time to the same
//! instant. `jiff` would by default read the host's zoneinfo at run time, which makes the answer
//! depend on the machine's tzdata version: the opposite of the determinism the spec asks of a
//! replayable fire instant. Measured cost here: chrono-tz compiles in about 6 s (debug, 2 cores).

use std::str::FromStr;

use chrono_tz::Tz;

use crate::CommitmentError;

/// A validated IANA zone. Construct it once when the tenant configuration is loaded, so a bad
/// zone is rejected there instead of silently shifting every reminder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeZoneSpec(Tz);

impl TimeZoneSpec {
    /// The default when a tenant configures nothing.
    pub const UTC: TimeZoneSpec = TimeZoneSpec(Tz::UTC);

    /// Accepts exactly the IANA names (and links such as `Etc/UTC`, `US/Eastern`) of the bundled
    /// tz database, case-sensitively: `Europe/Oslo`, not `europe/oslo`. Case-folding would need
    /// the `uncased` dependency and would accept spellings other tools reject.
    pub fn parse(name: &str) -> Result<Self, CommitmentError> {
        Tz::from_str(name)
            .map(TimeZoneSpec)
            .map_err(|_| CommitmentError::UnknownTimeZone)
    }

    /// The canonical IANA name, for storing back into tenant configuration.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The bundled tz database release, for shared/commitments/README.md and for diagnosing a
    /// changed answer.
    pub fn database_version() -> &'static str {
        chrono_tz::IANA_TZDB_VERSION
    }

    pub(crate) fn tz(&self) -> Tz {
        self.0
    }
}

impl Default for TimeZoneSpec {
    fn default() -> Self {
        Self::UTC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iana_names_and_rejects_others() {
        assert_eq!(TimeZoneSpec::parse("UTC").unwrap(), TimeZoneSpec::UTC);
        assert_eq!(
            TimeZoneSpec::parse("Europe/Oslo").unwrap().name(),
            "Europe/Oslo"
        );
        assert!(TimeZoneSpec::parse("America/New_York").is_ok());
        assert!(TimeZoneSpec::parse("Etc/UTC").is_ok());
        for bad in [
            "",
            "europe/oslo",
            "Mars/Olympus",
            "UTC+1",
            " UTC",
            "Europe/Oslo\0",
        ] {
            assert_eq!(
                TimeZoneSpec::parse(bad),
                Err(CommitmentError::UnknownTimeZone),
                "{bad:?}"
            );
        }
        assert_eq!(TimeZoneSpec::default(), TimeZoneSpec::UTC);
        assert_eq!(TimeZoneSpec::database_version().len(), 5);
    }
}
