//! The `figure-8` fault: Raft's figure 8 (§5.4.2) staged on purpose, round after round,
//! from who leads. Each round:
//!
//! 0. cut every node off from every other, until L1 has stepped down (its pending reads
//!    fail, freeing their clients; its pending writes stay), and slow every node's answers
//!    to clients;
//! 1. keep the leader L1 cut off (it holds writes its followers never saw); the others
//!    talk again, over slow links;
//! 2. once another node L2 leads, cut L2 off instead, before it replicates anything, and
//!    reconnect L1;
//! 3. once L1 (or a node other than L2) has led again for a moment, cut it off and
//!    reconnect L2;
//! 4. once L2 leads again, heal, let the cluster settle, and start the next round.
//!
//! With three nodes step 3 can only elect L1 (the remaining follower lacks L1's entries, L2
//! is cut off), which replicates its old-term entries to that follower. A correct leader
//! commits them only with an entry of its own term; a buggy one counts them committed at
//! once. Answers to clients are delayed, so the clients it acknowledged do not come back
//! with writes of the new term before it is cut off; then L2, whose last entry's term is
//! higher, wins the follower's vote and overwrites what was acknowledged.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{with_error, Nemesis, NetPart};
use crate::network::CutMode;
use crate::plan::{blocked_flows, NodeNames};
use crate::{ClusterControl, NemesisRecorder};

/// How often a `figure-8` fault asks who leads: a round's third cut must land within
/// milliseconds of the election it answers.
pub(super) const FIGURE8_POLL: Duration = Duration::from_millis(5);
/// Quiet time with a healed network between rounds, so clients find the leader again.
const SETTLE_MS: u64 = 1_000;
/// How long every node stays cut off from every other at the start of a round: longer
/// than a leader takes to step down without a quorum (twice the election timeout), so
/// the first leader's pending reads fail and free their clients before anyone else can
/// lead (its pending writes stay: they are the entries only it has).
const HOLD_MS: u64 = 900;
/// How long the third leader leads before it is cut off: two round trips, for it to
/// count its earlier-term entries replicated.
const GRACE_MS: u64 = 10;
/// A stage that has not moved on after this long gives the round up.
const STAGE_LIMIT_MS: u64 = 3_000;
/// Delay on every node's answers to its clients while a round runs: the clients the third
/// leader acknowledges, and those still looking for a leader, must not come to it with
/// writes of its term in the moment before it is cut off.
pub(super) const SLOW_ANSWERS: Duration = Duration::from_millis(150);
/// Delay on the links among the other nodes while they elect the second leader, so that
/// its first entries are still in flight when it is cut off.
pub(super) const SLOW_PEERS: Duration = Duration::from_millis(100);

/// Where a round is. Node indices are 0-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Network healed; a round starts once this stage is `SETTLE_MS` old.
    Settle,
    /// Every node cut off from every other, for `HOLD_MS`.
    Hold { first: usize },
    /// `first` is cut off, the others talk over slow links; waiting for one to lead.
    AwaitSecond { first: usize },
    /// `second` is cut off, `first` is back; waiting for a node other than `second` to
    /// lead (`first` only counts once it has been seen not leading: it may still claim
    /// its old term), and then for `GRACE_MS` (`seen`: the stage age when it was seen).
    AwaitThird {
        first: usize,
        second: usize,
        first_down: bool,
        seen: Option<(usize, u64)>,
    },
    /// `third` is cut off, `second` is back; waiting for `second` to lead again (once
    /// seen not leading, as above).
    AwaitOverwrite {
        first: usize,
        second: usize,
        third: usize,
        second_down: bool,
    },
}

/// The network a stage wants. The default is a healed network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Shape {
    /// Every node cut off from every other.
    pub(super) cut_all: bool,
    /// One node cut off from every other.
    pub(super) isolated: Option<usize>,
    /// The links among the nodes other than `isolated` delayed by `SLOW_PEERS`.
    pub(super) slow_peers: bool,
    /// Every node's answers to its clients delayed by `SLOW_ANSWERS`.
    pub(super) slow_answers: bool,
}

/// A stage change: the new stage, and if the network must change, the new network and
/// the step's name for the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Transition {
    pub(super) stage: Stage,
    pub(super) net: Option<(Shape, &'static str)>,
}

fn cut(isolated: usize) -> Shape {
    Shape {
        isolated: Some(isolated),
        slow_answers: true,
        ..Shape::default()
    }
}

fn healed(step: &'static str) -> Transition {
    Transition {
        stage: Stage::Settle,
        net: Some((Shape::default(), step)),
    }
}

fn stay(stage: Stage) -> Option<Transition> {
    Some(Transition { stage, net: None })
}

/// The next stage, given the nodes that say they lead now and how long the current stage
/// has lasted; `None` when nothing changes. Pure, so the sequence is unit-tested.
pub(super) fn advance(stage: Stage, leaders: &[usize], age_ms: u64) -> Option<Transition> {
    let leads = |i: usize| leaders.contains(&i);
    let timed_out = age_ms >= STAGE_LIMIT_MS;
    match stage {
        Stage::Settle => {
            let &first = leaders.first().filter(|_| age_ms >= SETTLE_MS)?;
            let shape = Shape {
                cut_all: true,
                slow_answers: true,
                ..Shape::default()
            };
            Some(Transition {
                stage: Stage::Hold { first },
                net: Some((shape, "cut-every-node")),
            })
        }
        Stage::Hold { first } => {
            let shape = Shape {
                slow_peers: true,
                ..cut(first)
            };
            (age_ms >= HOLD_MS).then_some(Transition {
                stage: Stage::AwaitSecond { first },
                net: Some((shape, "cut-first-leader")),
            })
        }
        Stage::AwaitSecond { first } => {
            if let Some(&second) = leaders.iter().find(|&&i| i != first) {
                return Some(Transition {
                    stage: Stage::AwaitThird {
                        first,
                        second,
                        first_down: !leads(first),
                        seen: None,
                    },
                    net: Some((cut(second), "cut-second-leader")),
                });
            }
            timed_out.then(|| healed("give-up"))
        }
        Stage::AwaitThird {
            first,
            second,
            first_down,
            seen,
        } => {
            let down = first_down || !leads(first);
            let third = leaders
                .iter()
                .copied()
                .find(|&i| i != second && (i != first || down));
            match (third, seen) {
                (Some(third), Some((s, at))) if s == third && age_ms >= at + GRACE_MS => {
                    return Some(Transition {
                        stage: Stage::AwaitOverwrite {
                            first,
                            second,
                            third,
                            second_down: !leads(second),
                        },
                        net: Some((cut(third), "cut-third-leader")),
                    });
                }
                (Some(third), s) if s.map(|(i, _)| i) != Some(third) => {
                    return stay(Stage::AwaitThird {
                        first,
                        second,
                        first_down: down,
                        seen: Some((third, age_ms)),
                    });
                }
                _ => {}
            }
            if timed_out {
                return Some(healed("give-up"));
            }
            (down != first_down).then_some(Transition {
                stage: Stage::AwaitThird {
                    first,
                    second,
                    first_down: down,
                    seen,
                },
                net: None,
            })
        }
        Stage::AwaitOverwrite {
            first,
            second,
            third,
            second_down,
        } => {
            let down = second_down || !leads(second);
            if down && leads(second) {
                return Some(healed("second-leads-again"));
            }
            if leaders.iter().any(|&i| i != second && i != third) {
                return Some(healed("another-leader"));
            }
            if timed_out {
                return Some(healed("give-up"));
            }
            (down != second_down).then_some(Transition {
                stage: Stage::AwaitOverwrite {
                    first,
                    second,
                    third,
                    second_down: down,
                },
                net: None,
            })
        }
    }
}

/// A running `figure-8` fault.
pub(super) struct Figure8Job {
    pub(super) stage: Stage,
    pub(super) stage_since: Instant,
    pub(super) next_tick: Instant,
}

impl Figure8Job {
    /// A job whose first round starts at the first poll.
    pub(super) fn new(now: Instant) -> Figure8Job {
        Figure8Job {
            stage: Stage::Settle,
            stage_since: now
                .checked_sub(Duration::from_millis(SETTLE_MS))
                .unwrap_or(now),
            next_tick: now,
        }
    }
}

/// The network part of a shape.
pub(super) fn shape_part(
    names: NodeNames,
    shape: Shape,
    n: usize,
) -> Result<NetPart, crate::NemesisError> {
    let mut parts = Vec::new();
    if shape.cut_all {
        let every: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect();
        parts.push(NetPart::Cut(every, CutMode::Blackhole));
    }
    if let Some(i) = shape.isolated {
        let groups = super::ticks::isolate(names, i, n);
        parts.push(NetPart::Cut(
            blocked_flows(names, &groups, &[], n)?,
            CutMode::Blackhole,
        ));
    }
    if shape.slow_peers {
        let others: Vec<usize> = (0..n).filter(|&j| Some(j) != shape.isolated).collect();
        // links between the others and the isolated node are cut anyway
        parts.push(NetPart::Slow(others, SLOW_PEERS, Duration::ZERO));
    }
    if shape.slow_answers {
        parts.push(NetPart::SlowClient(
            (0..n).collect(),
            SLOW_ANSWERS,
            Duration::ZERO,
        ));
    }
    Ok(NetPart::Several(parts))
}

impl Nemesis {
    /// One poll of a `figure-8` fault: ask who leads, move the round on, apply and record
    /// the network the new stage wants.
    pub(super) async fn figure8_tick<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        k: usize,
        job: &mut Figure8Job,
        n: usize,
    ) {
        let leaders: Vec<usize> = cluster
            .leaders()
            .await
            .into_iter()
            .filter(|&i| i < n)
            .collect();
        let now = Instant::now();
        job.next_tick = now + FIGURE8_POLL;
        let age_ms = now.duration_since(job.stage_since).as_millis() as u64;
        let Some(t) = advance(job.stage, &leaders, age_ms) else {
            return;
        };
        job.stage = t.stage;
        let Some((shape, step)) = t.net else {
            return;
        };
        job.stage_since = now;
        let result =
            shape_part(self.names, shape, n).and_then(|part| self.set_net_part(k, part, n));
        let v = json!({"step": step, "leaders": self.names.names(&leaders),
                       "cut_all": shape.cut_all,
                       "isolated": shape.isolated.map(|i| self.names.name(i)),
                       "slow_peers_ms": if shape.slow_peers { SLOW_PEERS.as_millis() as u64 } else { 0 },
                       "slow_answers_ms": if shape.slow_answers { SLOW_ANSWERS.as_millis() as u64 } else { 0 }});
        match result {
            Ok(()) => recorder.record("figure-8", v),
            Err(e) => {
                recorder.record("figure-8", with_error(v, &[e.to_string()]));
                job.stage = Stage::Settle;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `advance` over a sequence of (leaders, stage age) polls, collecting the steps.
    fn run(polls: &[(&[usize], u64)]) -> (Stage, Vec<(&'static str, Shape)>) {
        let mut stage = Stage::Settle;
        let mut steps = Vec::new();
        for &(leaders, age) in polls {
            if let Some(t) = advance(stage, leaders, age) {
                stage = t.stage;
                if let Some((shape, step)) = t.net {
                    steps.push((step, shape));
                }
            }
        }
        (stage, steps)
    }

    #[test]
    fn a_full_round_cuts_every_node_then_first_second_third_and_heals() {
        // n1 leads; all cut; n1 alone cut; n3 takes over; n1 wins again, is cut after the
        // grace; n3 still claims its term, steps down, wins again.
        let (stage, steps) = run(&[
            (&[0], SETTLE_MS),
            (&[0], 10),
            (&[], HOLD_MS - 1),
            (&[], HOLD_MS),
            (&[2], 400),
            (&[0, 2], 400),                // n1 elected again (seen down when n3 won)
            (&[0, 2], 400 + GRACE_MS - 1), // still within the grace
            (&[0, 2], 400 + GRACE_MS),
            (&[0, 2], 5),   // n3's stale claim: not the overwrite yet
            (&[0], 10),     // n3 seen down
            (&[2, 0], 400), // n3 elected again
        ]);
        assert_eq!(stage, Stage::Settle);
        let names: Vec<&str> = steps.iter().map(|s| s.0).collect();
        assert_eq!(
            names,
            [
                "cut-every-node",
                "cut-first-leader",
                "cut-second-leader",
                "cut-third-leader",
                "second-leads-again"
            ]
        );
        let every = Shape {
            cut_all: true,
            slow_answers: true,
            ..Shape::default()
        };
        assert_eq!(steps[0].1, every);
        assert_eq!(
            steps[1].1,
            Shape {
                slow_peers: true,
                ..cut(0)
            }
        );
        assert_eq!(steps[2].1, cut(2));
        assert_eq!(steps[3].1, cut(0));
        assert_eq!(steps[4].1, Shape::default());
    }

    #[test]
    fn no_round_starts_before_the_settle_time_or_without_a_leader() {
        assert_eq!(advance(Stage::Settle, &[2], SETTLE_MS - 1), None);
        assert_eq!(advance(Stage::Settle, &[], SETTLE_MS * 10), None);
    }

    #[test]
    fn a_first_leader_still_claiming_its_old_term_is_not_the_third() {
        let t = advance(Stage::AwaitSecond { first: 0 }, &[0, 1], 300).unwrap();
        let stage = t.stage;
        assert_eq!(
            stage,
            Stage::AwaitThird {
                first: 0,
                second: 1,
                first_down: false,
                seen: None
            }
        );
        assert_eq!(advance(stage, &[0, 1], 50), None);
        let down = advance(stage, &[1], 60).unwrap();
        assert_eq!(down.net, None);
        let seen = advance(down.stage, &[0, 1], 500).unwrap();
        assert_eq!(seen.net, None);
        let t = advance(seen.stage, &[0, 1], 500 + GRACE_MS).unwrap();
        assert_eq!(t.net, Some((cut(0), "cut-third-leader")));
    }

    #[test]
    fn a_third_leader_other_than_the_first_is_cut_after_the_grace() {
        // with five nodes another follower may win step 3
        let stage = Stage::AwaitThird {
            first: 0,
            second: 1,
            first_down: false,
            seen: None,
        };
        let seen = advance(stage, &[0, 1, 3], 50).unwrap().stage;
        let t = advance(seen, &[0, 1, 3], 50 + GRACE_MS).unwrap();
        assert_eq!(t.net, Some((cut(3), "cut-third-leader")));
    }

    #[test]
    fn a_leader_other_than_the_second_ends_the_round() {
        let stage = Stage::AwaitOverwrite {
            first: 0,
            second: 1,
            third: 0,
            second_down: true,
        };
        let t = advance(stage, &[2], 50).unwrap();
        assert_eq!(t, healed("another-leader"));
    }

    #[test]
    fn every_waiting_stage_gives_up_after_the_limit() {
        let stages = [
            Stage::AwaitSecond { first: 0 },
            Stage::AwaitThird {
                first: 0,
                second: 1,
                first_down: true,
                seen: None,
            },
            Stage::AwaitOverwrite {
                first: 0,
                second: 1,
                third: 0,
                second_down: true,
            },
        ];
        for s in stages {
            assert_eq!(advance(s, &[], STAGE_LIMIT_MS - 1), None, "{s:?}");
            assert_eq!(
                advance(s, &[], STAGE_LIMIT_MS),
                Some(healed("give-up")),
                "{s:?}"
            );
        }
    }

    #[test]
    fn shapes_become_cuts_slow_links_and_a_slowed_client_link() {
        let NetPart::Several(parts) = shape_part(NodeNames::FROM_ONE, cut(1), 3).unwrap() else {
            panic!("not several")
        };
        assert_eq!(parts.len(), 2);
        assert!(matches!(&parts[0], NetPart::Cut(flows, CutMode::Blackhole)
            if flows == &vec![(0, 1), (1, 0), (1, 2), (2, 1)]));
        assert!(matches!(&parts[1], NetPart::SlowClient(nodes, d, _)
            if nodes == &vec![0, 1, 2] && *d == SLOW_ANSWERS));
        let all = Shape {
            cut_all: true,
            ..Shape::default()
        };
        let NetPart::Several(parts) = shape_part(NodeNames::FROM_ONE, all, 3).unwrap() else {
            panic!("not several")
        };
        assert!(matches!(&parts[0], NetPart::Cut(flows, _) if flows.len() == 6));
        let slow = Shape {
            slow_peers: true,
            ..cut(0)
        };
        let NetPart::Several(parts) = shape_part(NodeNames::FROM_ONE, slow, 3).unwrap() else {
            panic!("not several")
        };
        assert!(matches!(&parts[1], NetPart::Slow(nodes, d, _)
            if nodes == &vec![1, 2] && *d == SLOW_PEERS));
        let NetPart::Several(none) = shape_part(NodeNames::FROM_ONE, Shape::default(), 3).unwrap()
        else {
            panic!("not several")
        };
        assert!(none.is_empty());
    }
}
