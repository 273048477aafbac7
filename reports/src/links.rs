//! What the link proxies of a run on SSH hosts measured (`links.json` in the run
//! directory): per directed link between nodes, the messages passed and dropped and how
//! long chunks read while the link had a delay were held, so the delay and loss a run
//! applied are reported as measured, not as asked for.

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
    /// Hosts in the run.
    pub hosts: usize,
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
        format!(
            "measured by the link proxies ({}/{} hosts reporting): {delay}; {loss}",
            self.hosts_reporting, self.hosts
        )
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
}
