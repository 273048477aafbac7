//! Expectations and the judgement of one run against its cell's expectation.

use serde::{Deserialize, Serialize};
use splitbrain_checkers::Validity;
use splitbrain_reports::RunSummary;
use std::fmt;

/// The verdict a cell must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpectedVerdict {
    /// A correct system: every run valid.
    Valid,
    /// A known bug: runs invalid (on every seed, or `min_detect` of them).
    Invalid,
}

/// What a cell must give.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectation {
    /// Valid or invalid.
    pub verdict: ExpectedVerdict,
    /// Anomaly types every detecting run must name (all of them), e.g. `G1c`, `wrong-total`.
    pub anomalies: Vec<String>,
    /// Checkers that must say invalid in every detecting run (all of them), e.g. `bank`.
    pub checkers: Vec<String>,
    /// For timing-dependent bugs: the share of runs that must detect (default: all).
    pub min_detect: Option<MinDetect>,
}

impl Expectation {
    /// How many of `runs` runs must meet the expectation for the cell to pass.
    pub fn required(&self, runs: usize) -> usize {
        match (self.verdict, self.min_detect) {
            (ExpectedVerdict::Invalid, Some(m)) => m.required(runs),
            _ => runs,
        }
    }

    /// `valid`, `invalid`, `invalid: G1c, bank ≥ 2/3`: for tables.
    pub fn label(&self) -> String {
        let mut s = match self.verdict {
            ExpectedVerdict::Valid => "valid".to_string(),
            ExpectedVerdict::Invalid => "invalid".to_string(),
        };
        let names: Vec<&str> = self
            .anomalies
            .iter()
            .chain(&self.checkers)
            .map(String::as_str)
            .collect();
        if !names.is_empty() {
            s.push_str(&format!(": {}", names.join(", ")));
        }
        if let Some(m) = self.min_detect {
            s.push_str(&format!(" (≥ {m})"));
        }
        s
    }
}

/// `k/n`: at least k of every n runs must detect (rounded up for other run counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinDetect {
    /// k.
    pub detected: u32,
    /// n.
    pub of: u32,
}

impl MinDetect {
    /// Parses `k/n` with 0 < k ≤ n.
    pub fn parse(s: &str) -> Result<MinDetect, String> {
        let bad =
            || format!("min_detect must look like \"2/3\" (k of n runs, 0 < k <= n), got {s:?}");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: u32 = k.trim().parse().map_err(|_| bad())?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(MinDetect { detected: k, of: n })
    }

    /// Runs out of `runs` that must detect: ceil(runs × k / n), at least 1.
    pub fn required(self, runs: usize) -> usize {
        let (k, n) = (self.detected as usize, self.of as usize);
        (runs * k).div_ceil(n).max(1)
    }
}

impl fmt::Display for MinDetect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.detected, self.of)
    }
}

impl Serialize for MinDetect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for MinDetect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        MinDetect::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What one run gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunVerdict {
    /// Every checker valid.
    Valid,
    /// Some checker found an anomaly.
    Invalid,
    /// Undecided (a bound hit, or a hollow run).
    Unknown,
    /// The run could not run or was cut short (exit 4 of `splitbrain test`).
    Error,
}

impl RunVerdict {
    /// `valid`, `INVALID`, `unknown`, `error`: the words `splitbrain test` uses.
    pub fn label(self) -> &'static str {
        match self {
            RunVerdict::Valid => "valid",
            RunVerdict::Invalid => "INVALID",
            RunVerdict::Unknown => "unknown",
            RunVerdict::Error => "error",
        }
    }
}

/// One run judged against its cell's expectation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunJudgement {
    /// What the run gave.
    pub verdict: RunVerdict,
    /// Each invalid checker with the anomaly types it named: `bank(wrong-total)`.
    pub found: Vec<String>,
    /// Whether this run gave what the cell expects (for a bug cell: it detected the bug).
    pub met: bool,
    /// Why not, when it did not (or why the run errored / was unknown).
    pub note: String,
}

/// Judges one run: `outcome` is its summary, or the error that kept it from running.
pub fn judge_run(expect: &Expectation, outcome: Result<&RunSummary, &str>) -> RunJudgement {
    let s = match outcome {
        Err(e) => {
            return RunJudgement {
                verdict: RunVerdict::Error,
                found: Vec::new(),
                met: false,
                note: e.to_string(),
            }
        }
        Ok(s) => s,
    };
    let invalid: Vec<_> = s
        .results
        .iter()
        .filter(|r| r.valid == Validity::Invalid)
        .collect();
    let found = invalid
        .iter()
        .map(|r| match r.anomaly_types.is_empty() {
            true => r.checker.clone(),
            false => format!("{}({})", r.checker, r.anomaly_types.join(",")),
        })
        .collect();
    let verdict = match (&s.incomplete, s.valid) {
        (Some(_), _) => RunVerdict::Error,
        (None, Validity::Valid) => RunVerdict::Valid,
        (None, Validity::Invalid) => RunVerdict::Invalid,
        (None, Validity::Unknown) => RunVerdict::Unknown,
    };
    let why_unknown = || {
        s.results
            .iter()
            .find(|r| r.valid == Validity::Unknown)
            .map(|r| format!("{}: {}", r.checker, first_sentence(&r.explanation)))
            .unwrap_or_else(|| "undecided".into())
    };
    let (met, note) = match (verdict, expect.verdict) {
        (RunVerdict::Error, _) => (false, s.incomplete.clone().unwrap_or_default()),
        (RunVerdict::Unknown, _) => (false, why_unknown()),
        (RunVerdict::Valid, ExpectedVerdict::Valid) => (true, String::new()),
        (RunVerdict::Valid, ExpectedVerdict::Invalid) => {
            (false, "missed: the run was valid".into())
        }
        (RunVerdict::Invalid, ExpectedVerdict::Valid) => (
            false,
            "false positive: a correct system was judged invalid".into(),
        ),
        (RunVerdict::Invalid, ExpectedVerdict::Invalid) => {
            let missing: Vec<&str> = expect
                .anomalies
                .iter()
                .filter(|a| !invalid.iter().any(|r| r.anomaly_types.contains(a)))
                .chain(
                    expect
                        .checkers
                        .iter()
                        .filter(|c| !invalid.iter().any(|r| &r.checker == *c)),
                )
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                (true, String::new())
            } else {
                (
                    false,
                    format!("invalid, but without {}", missing.join(", ")),
                )
            }
        }
    };
    RunJudgement {
        verdict,
        found,
        met,
        note,
    }
}

/// The first sentence (or 160 characters) of an explanation, for one-line notes.
fn first_sentence(s: &str) -> String {
    let end = s.find(". ").map(|i| i + 1).unwrap_or(s.len());
    s[..end].chars().take(160).collect()
}

#[cfg(test)]
#[path = "expect_tests.rs"]
mod tests;
