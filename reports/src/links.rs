//! What the link proxies of a run measured (`links.json` in the run directory), on SSH
//! hosts or in a local run's proxy mesh: per directed link between nodes, the messages
//! passed and dropped and how long chunks read while the link had a delay were held, over
//! the whole run and per fault window (from one change of the link's faults to the
//! next), so the delay and loss a run applied are reported as measured, not as asked for.

use serde::{Deserialize, Serialize};

/// One directed link's measurements (`n1` -> `n2`: node 1's messages to node 2, whichever
/// side dialled), or the total over all of them (`*` -> `*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkMeasure {
    /// The sending node.
    pub from: String,
    /// The receiving node.
    pub to: String,
    /// Newline-terminated messages read from the sender.
    pub messages: u64,
    /// Of them, dropped by loss.
    pub dropped: u64,
    /// `dropped / messages`, when any message passed.
    pub measured_loss: Option<f64>,
    /// Chunks read while the link had a delay.
    pub delayed_chunks: u64,
    /// Their mean time in the proxy (read to written), ms.
    pub mean_delay_ms: Option<f64>,
    /// The longest time any chunk spent in the proxy, ms.
    pub max_held_ms: f64,
    /// Chunks of a binary stream held back for a retransmission (its loss: the stream
    /// stalls instead of losing bytes).
    #[serde(default)]
    pub stalled_chunks: u64,
    /// Their mean time in the proxy, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_stall_ms: Option<f64>,
}

/// What every host's link proxy measured in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkMeasures {
    /// Per directed link between nodes.
    pub links: Vec<LinkMeasure>,
    /// Over all links (mean delay over all delayed chunks, loss over all messages).
    pub total: LinkMeasure,
    /// Hosts whose proxy reported at the end.
    pub hosts_reporting: usize,
    /// Hosts in the run (0: a local run, whose proxy mesh is in the harness).
    pub hosts: usize,
    /// Per directed link, per fault window: what was asked while one set of faults held
    /// on it, and what the proxies measured then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<LinkWindow>,
    /// Per fault: the windows one change of the faults opened with the same asked
    /// faults, summed over their links (only windows with a delay, loss or cut).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<LinkFault>,
    /// Over every window with no fault asked (loss there should be none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside: Option<LinkMeasure>,
}

/// The faults asked of a link in one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AskedLink {
    /// Added delay, ms.
    pub delay_ms: f64,
    /// Jitter around it, ms.
    pub jitter_ms: f64,
    /// Fraction of messages to lose.
    pub loss: f64,
    /// The link was cut.
    pub cut: bool,
}

impl AskedLink {
    /// True when anything was asked.
    pub fn is_fault(&self) -> bool {
        self.delay_ms > 0.0 || self.jitter_ms > 0.0 || self.loss > 0.0 || self.cut
    }
}

/// One directed link's measurements while one set of faults held on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkWindow {
    /// The change of faults that opened it (None: the window open from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When it opened, seconds into the run (as the harness's clock places the proxy's
    /// start; within a round trip to the host).
    pub start_s: f64,
    /// When it closed (None: open at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// What was asked.
    pub asked: AskedLink,
    /// What was measured (`from`/`to` name the link).
    pub measured: LinkMeasure,
}

/// One fault's windows, summed over the links it changed alike.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkFault {
    /// The change of faults that opened the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The earliest start, seconds into the run.
    pub start_s: f64,
    /// The latest end (None: some window was open at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// What was asked of each link.
    pub asked: AskedLink,
    /// The links, `n1->n2`.
    pub links: Vec<String>,
    /// Summed over them.
    pub measured: LinkMeasure,
}

impl LinkFault {
    /// One line: asked against measured, e.g. `slow +80 ms on n2->n3 (4.0-9.0 s): measured
    /// 81.3 ms mean over 412 chunks (longest 95.1 ms)`.
    pub fn describe(&self) -> String {
        let a = &self.asked;
        let m = &self.measured;
        let mut what = Vec::new();
        let mut got = Vec::new();
        if a.cut {
            what.push("cut".to_string());
        }
        if a.delay_ms > 0.0 || a.jitter_ms > 0.0 {
            let jitter = if a.jitter_ms > 0.0 {
                format!(" ±{:.0} ms", a.jitter_ms)
            } else {
                String::new()
            };
            what.push(format!("slow +{:.0} ms{jitter}", a.delay_ms));
            got.push(match m.mean_delay_ms {
                Some(ms) => format!(
                    "measured {ms:.1} ms mean over {} chunks (longest {:.1} ms)",
                    m.delayed_chunks, m.max_held_ms
                ),
                None => "no chunk passed".to_string(),
            });
        }
        if a.loss > 0.0 {
            what.push(format!("loss {:.0} %", a.loss * 100.0));
            got.push(match (m.measured_loss, m.mean_stall_ms) {
                // a binary stream: nothing dropped, pieces held for retransmissions
                (_, Some(ms)) => format!(
                    "{} chunks stalled for a retransmission, {ms:.0} ms mean; {} of {} \
                     messages dropped",
                    m.stalled_chunks, m.dropped, m.messages
                ),
                (Some(l), None) => format!("dropped {:.1} % of {}", l * 100.0, m.messages),
                (None, None) => "no message passed".to_string(),
            });
        }
        let links = if self.links.len() > 4 {
            format!(
                "{} and {} more links",
                self.links[..3].join(", "),
                self.links.len() - 3
            )
        } else {
            self.links.join(", ")
        };
        let end = match self.end_s {
            Some(e) => format!("{e:.1} s"),
            None => "end".to_string(),
        };
        let got = if got.is_empty() {
            String::new()
        } else {
            format!(": {}", got.join("; "))
        };
        format!(
            "{} on {links} ({:.1}-{end}){got}",
            what.join(" + "),
            self.start_s
        )
    }
}

impl LinkMeasures {
    /// One line for a person: the measured delay and loss over every link.
    pub fn describe(&self) -> String {
        let t = &self.total;
        let delay = match t.mean_delay_ms {
            Some(ms) => format!(
                "delayed chunks held {ms:.1} ms on average ({} chunks, longest {:.1} ms)",
                t.delayed_chunks, t.max_held_ms
            ),
            None => "no chunk was delayed".to_string(),
        };
        let loss = match t.measured_loss {
            Some(l) => format!(
                "{} of {} messages dropped ({:.1}%)",
                t.dropped,
                t.messages,
                l * 100.0
            ),
            None => "no message passed".to_string(),
        };
        if self.hosts == 0 {
            return format!("measured by the local proxy mesh: {delay}; {loss}");
        }
        format!(
            "measured by the link proxies ({}/{} hosts reporting): {delay}; {loss}",
            self.hosts_reporting, self.hosts
        )
    }

    /// One line per fault (asked against measured), then one for the time outside them.
    pub fn describe_faults(&self) -> Vec<String> {
        let mut out: Vec<String> = self.faults.iter().map(LinkFault::describe).collect();
        if let Some(o) = &self.outside {
            out.push(format!(
                "outside fault windows: {} of {} messages dropped (longest hold {:.1} ms)",
                o.dropped, o.messages, o.max_held_ms
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_gives_measured_delay_and_loss_or_says_there_were_none() {
        let mut m = LinkMeasures {
            hosts_reporting: 3,
            hosts: 3,
            ..LinkMeasures::default()
        };
        let none = m.describe();
        assert!(none.contains("no chunk was delayed"), "{none}");
        assert!(none.contains("no message passed"), "{none}");
        m.total = LinkMeasure {
            messages: 200,
            dropped: 21,
            measured_loss: Some(0.105),
            delayed_chunks: 40,
            mean_delay_ms: Some(101.25),
            max_held_ms: 130.0,
            ..LinkMeasure::default()
        };
        let line = m.describe();
        assert!(line.contains("3/3 hosts"), "{line}");
        assert!(
            line.contains("101.2 ms on average (40 chunks, longest 130.0 ms)"),
            "{line}"
        );
        assert!(
            line.contains("21 of 200 messages dropped (10.5%)"),
            "{line}"
        );
    }

    #[test]
    fn each_fault_reads_asked_against_measured() {
        let slow = LinkFault {
            seq: Some(3),
            start_s: 4.0,
            end_s: Some(9.0),
            asked: AskedLink {
                delay_ms: 80.0,
                ..AskedLink::default()
            },
            links: vec!["n2->n3".into()],
            measured: LinkMeasure {
                delayed_chunks: 412,
                mean_delay_ms: Some(81.26),
                max_held_ms: 95.0,
                ..LinkMeasure::default()
            },
        };
        assert_eq!(
            slow.describe(),
            "slow +80 ms on n2->n3 (4.0-9.0 s): measured 81.3 ms mean over 412 chunks \
             (longest 95.0 ms)"
        );
        let lossy = LinkFault {
            end_s: None,
            asked: AskedLink {
                loss: 0.3,
                ..AskedLink::default()
            },
            links: (1..=5).map(|k| format!("n{k}->n6")).collect(),
            measured: LinkMeasure {
                messages: 1203,
                dropped: 350,
                measured_loss: Some(350.0 / 1203.0),
                ..LinkMeasure::default()
            },
            ..slow.clone()
        };
        assert_eq!(
            lossy.describe(),
            "loss 30 % on n1->n6, n2->n6, n3->n6 and 2 more links (4.0-end): dropped 29.1 % \
             of 1203"
        );
        let m = LinkMeasures {
            faults: vec![slow, lossy],
            outside: Some(LinkMeasure {
                messages: 900,
                max_held_ms: 1.26,
                ..LinkMeasure::default()
            }),
            ..LinkMeasures::default()
        };
        let lines = m.describe_faults();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[2],
            "outside fault windows: 0 of 900 messages dropped (longest hold 1.3 ms)"
        );
    }
}
