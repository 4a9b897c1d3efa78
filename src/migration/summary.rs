//! What a conversion did: users written, skipped (with reasons), without password, and the
//! notices worth a look. Counts are exact; each reason keeps only a few example users, so the
//! summary of a large input stays small.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// How many example users a reason keeps.
const EXAMPLES: usize = 5;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub output: PathBuf,
    pub org: String,
    /// Users found in the input.
    pub seen: u64,
    pub written: u64,
    pub without_password: u64,
    pub with_otp: u64,
    pub inactive: u64,
    pub password_change_required: u64,
    pub skipped: Tally,
    pub notices: Tally,
}

/// Counts per reason, with a few example users each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally(BTreeMap<String, (u64, Vec<String>)>);

impl Tally {
    pub fn add(&mut self, reason: &str, user: &str) {
        let entry = match self.0.get_mut(reason) {
            Some(e) => e,
            None => self.0.entry(reason.to_string()).or_default(),
        };
        entry.0 += 1;
        if entry.1.len() < EXAMPLES {
            entry.1.push(user.to_string());
        }
    }

    /// How many users a reason was given for.
    pub fn count(&self, reason: &str) -> u64 {
        self.0.get(reason).map_or(0, |e| e.0)
    }

    /// How many users any reason was given for.
    pub fn total(&self) -> u64 {
        self.0.values().map(|e| e.0).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(reason, count, examples)`, ordered by reason.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64, &[String])> {
        self.0.iter().map(|(r, (n, ex))| (r.as_str(), *n, ex.as_slice()))
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (reason, n, examples) in self.iter() {
            let more = if n > examples.len() as u64 {
                format!(", and {} more", n - examples.len() as u64)
            } else {
                String::new()
            };
            writeln!(f, "  {reason} ({n}): {}{more}", examples.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "wrote {} of {} users to {} (organization {})",
            self.written,
            self.seen,
            self.output.display(),
            self.org
        )?;
        writeln!(
            f,
            "  without password: {}; with OTP: {}; inactive: {}; must change password: {}",
            self.without_password, self.with_otp, self.inactive, self.password_change_required
        )?;
        if self.without_password > 0 {
            writeln!(f, "  (on import, users without password are e-mailed to set one)")?;
        }
        if !self.skipped.is_empty() {
            writeln!(f, "skipped {} users:", self.skipped.total())?;
            write!(f, "{}", self.skipped)?;
        }
        if !self.notices.is_empty() {
            writeln!(f, "notices:")?;
            write!(f, "{}", self.notices)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_everything_and_keeps_a_few_examples() {
        let mut t = Tally::default();
        for i in 0..8 {
            t.add("service account", &format!("sa-{i}"));
        }
        t.add("no username", "id-1");
        assert_eq!(t.count("service account"), 8);
        assert_eq!(t.total(), 9);
        let text = t.to_string();
        assert!(text.contains("  no username (1): id-1\n"), "{text}");
        assert!(text.contains("  service account (8): sa-0, sa-1, sa-2, sa-3, sa-4, and 3 more\n"), "{text}");
    }

    #[test]
    fn summary_reads_as_a_report() {
        let mut s = Summary {
            output: "out.json".into(),
            org: "42".into(),
            seen: 3,
            written: 2,
            without_password: 1,
            ..Summary::default()
        };
        s.skipped.add("service account", "sa");
        let text = s.to_string();
        assert!(text.starts_with("wrote 2 of 3 users to out.json (organization 42)\n"));
        assert!(text.contains("without password: 1;"));
        assert!(text.contains("skipped 1 users:\n  service account (1): sa\n"));
        assert!(!text.contains("notices"));
    }
}
