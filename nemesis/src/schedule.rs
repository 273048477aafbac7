//! The random fault schedule: a pure function of (seed, faults, interval, node count,
//! duration), so a run can be repeated exactly with the same seed.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::network::CutMode;
use crate::plan::{ClockMode, FaultAction, NodeNames, PlannedFault, Target};
use crate::spec::NemesisSpec;

/// Shortest `figure-8` fault beside other link faults: a round (hold, three elections,
/// settle) takes 3-5 s.
pub(crate) const FIGURE8_MIN_MS: u64 = 9_000;

/// Upper bound on schedule length, whatever the duration and interval.
const MAX_FAULTS: usize = 10_000;

/// Partition shapes the schedule picks from.
pub(crate) const SHAPES: &[&str] = &[
    "halves",
    "random-halves",
    "isolate",
    "isolate-leader",
    "majority-minority",
    "majorities-ring",
    "bridge",
    "one-way",
];

/// Fault classes with their own timelines: faults of one class never overlap (so a node
/// is never killed and paused at once, and partitions do not stack), while faults of
/// different classes do, as in Jepsen's composed nemeses (a partition during a leader kill).
/// The class of `kind`: processes 0, links (between nodes or to clients) 1, clocks 2.
pub(crate) fn class_of(kind: &str) -> Option<usize> {
    match kind {
        "kill" | "kill-one" | "pause" | "strobe-pause" => Some(0),
        "clock" => Some(2),
        k if crate::NETWORK_FAULTS.contains(&k) || crate::CLIENT_LINK_FAULTS.contains(&k) => {
            Some(1)
        }
        _ => None,
    }
}

/// How many classes [`class_of`] names.
const CLASS_COUNT: usize = 3;

/// Builds the schedule. Each class present runs its own timeline: a fault lasting between
/// a quarter and three quarters of the class interval, then a quiet gap of the same range.
/// The class interval is `interval` times the number of classes present, so across all
/// classes a fault starts on average once per `interval`.
/// Nodes are named by `names`.
pub(crate) fn generate(
    spec: &NemesisSpec,
    names: NodeNames,
    n: usize,
    duration_ms: u64,
) -> Vec<PlannedFault> {
    let iv = spec.interval.as_millis().min(u64::MAX as u128) as u64;
    let kinds: Vec<&str> = spec
        .faults
        .iter()
        .map(String::as_str)
        .filter(|k| {
            !matches!(
                *k,
                "partition" | "partition-leader" | "leader-churn" | "figure-8"
            ) || n >= 2
        })
        .collect();
    if kinds.is_empty() || n == 0 || iv == 0 {
        return Vec::new();
    }
    let classes: Vec<(usize, Vec<&str>)> = (0..CLASS_COUNT)
        .map(|c| {
            (
                c,
                kinds
                    .iter()
                    .copied()
                    .filter(|k| class_of(k) == Some(c))
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, ks)| !ks.is_empty())
        .collect();
    let class_iv = iv.saturating_mul(classes.len() as u64);
    let mut out = Vec::new();
    for (c, class_kinds) in classes {
        // one seeded stream per class, so adding a class does not reshuffle the others
        let mut rng = ChaCha8Rng::seed_from_u64(
            spec.seed ^ (c as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        timeline(
            &class_kinds,
            names,
            n,
            class_iv,
            duration_ms,
            &mut rng,
            &mut out,
        );
    }
    if kinds.contains(&"clock")
        && kinds
            .iter()
            .any(|k| matches!(*k, "partition" | "partition-leader"))
    {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x5eed_c10c_0a11_9e00);
        align_clock_faults(&mut out, &mut rng);
    }
    out.sort_by_key(|f| f.at_ms);
    out
}

/// Moves clocks where it matters: a clock that jumps back on a leader that has just been
/// cut off is what stretches a lease past the election of its successor (a jump before
/// the cut only shifts the clock the lease is measured on). So, when both partitions and
/// clock faults are asked for, three partitions in four get a clock fault on whoever leads
/// when it starts (resolved then), jumping back 1-5 s shortly after the cut and lasting
/// until the heal; random clock faults overlapping it are dropped, as a class's faults
/// never overlap.
fn align_clock_faults(out: &mut Vec<PlannedFault>, rng: &mut ChaCha8Rng) {
    let partitions: Vec<(u64, u64)> = out
        .iter()
        .filter(|f| matches!(f.action, FaultAction::Partition { .. }))
        .map(|f| (f.at_ms, f.for_ms))
        .collect();
    for (at_ms, for_ms) in partitions {
        if !rng.gen_bool(0.75) {
            continue;
        }
        // after the cut, but well inside the lease the leader last renewed
        let delay = rng.gen_range(20..=100u64).min(for_ms / 2);
        let aligned = PlannedFault {
            at_ms: at_ms + delay,
            for_ms: (for_ms - delay).max(1),
            action: FaultAction::Clock {
                mode: ClockMode::Bump,
                target: Target::Leader,
                nodes: Vec::new(),
                offset_ms: -rng.gen_range(1_000..=5_000i64),
                period_ms: 0,
            },
        };
        let (start, end) = (aligned.at_ms, aligned.at_ms + aligned.for_ms);
        out.retain(|f| {
            !matches!(f.action, FaultAction::Clock { .. })
                || f.at_ms + f.for_ms <= start
                || f.at_ms >= end
        });
        out.push(aligned);
    }
}

fn timeline(
    kinds: &[&str],
    names: NodeNames,
    n: usize,
    iv: u64,
    duration_ms: u64,
    rng: &mut ChaCha8Rng,
    out: &mut Vec<PlannedFault>,
) {
    let span = |rng: &mut ChaCha8Rng| rng.gen_range((iv / 4).max(1)..=(iv * 3 / 4).max(1));
    let mut t = span(rng);
    if kinds == ["figure-8"] {
        // Alone in its class, `figure-8` runs to the end: its rounds heal and settle the
        // network between them, and a scheduled stop would only cut a round off midway
        // (7 rounds of 35 in ten 20 s runs, besides the time lost in the gaps).
        if t < duration_ms {
            out.push(PlannedFault {
                at_ms: t,
                for_ms: (duration_ms - t).max(FIGURE8_MIN_MS),
                action: action("figure-8", names, n, rng),
            });
        }
        return;
    }
    // Kinds are dealt from a shuffled deck, refilled when empty: every kind asked for
    // comes once before any comes twice, so a short run still exercises each of them.
    let mut deck: Vec<&str> = Vec::new();
    while t < duration_ms && out.len() < MAX_FAULTS {
        if deck.is_empty() {
            deck = kinds.to_vec();
            deck.shuffle(rng);
        }
        let Some(kind) = deck.pop() else { break };
        let mut for_ms = span(rng);
        if kind == "figure-8" {
            // room for two of its rounds, whatever the interval
            for_ms = for_ms.max(FIGURE8_MIN_MS);
        }
        out.push(PlannedFault {
            at_ms: t,
            for_ms,
            action: action(kind, names, n, rng),
        });
        t = t.saturating_add(for_ms).saturating_add(span(rng));
    }
}

fn action(kind: &str, names: NodeNames, n: usize, rng: &mut ChaCha8Rng) -> FaultAction {
    match kind {
        "kill" | "pause" => {
            let targets = [
                Target::One,
                Target::Minority,
                Target::Majority,
                Target::All,
                Target::Leader,
            ];
            let target = targets[rng.gen_range(0..targets.len())];
            let nodes = names.names(&pick(target, n, rng));
            if kind == "kill" {
                FaultAction::Kill { target, nodes }
            } else {
                FaultAction::Pause { target, nodes }
            }
        }
        // One node at a time: a crash a majority survives, so a system that can go on
        // without a member (an elastic training group) has to.
        "kill-one" => FaultAction::Kill {
            target: Target::One,
            nodes: names.names(&pick(Target::One, n, rng)),
        },
        "partition" => partition(names, n, rng),
        // Always the leader alone against the rest (who leads is resolved when it starts).
        "partition-leader" => FaultAction::Partition {
            shape: "isolate-leader".into(),
            groups: Vec::new(),
            blocked: Vec::new(),
            mode: CutMode::Blackhole,
        },
        // Who to cut off is decided while the fault runs, from who leads.
        "leader-churn" => FaultAction::Partition {
            shape: "leader-churn".into(),
            groups: Vec::new(),
            blocked: Vec::new(),
            mode: CutMode::Blackhole,
        },
        // Raft's figure 8, staged round after round from who leads (runner/figure8.rs).
        "figure-8" => FaultAction::Partition {
            shape: "figure-8".into(),
            groups: Vec::new(),
            blocked: Vec::new(),
            mode: CutMode::Blackhole,
        },
        "clock" => {
            let mode = [ClockMode::Bump, ClockMode::Strobe, ClockMode::Skew][rng.gen_range(0..3)];
            let target =
                [Target::One, Target::Minority, Target::All, Target::Leader][rng.gen_range(0..4)];
            clock_action(mode, target, names, n, rng)
        }
        "slow" => {
            let target = [Target::One, Target::All][rng.gen_range(0..2)];
            let delay_ms = rng.gen_range(20..=200);
            FaultAction::Slow {
                nodes: names.names(&pick(target, n, rng)),
                delay_ms,
                jitter_ms: delay_ms / 4,
            }
        }
        "slow-client" => {
            let target = [Target::One, Target::Follower, Target::Leader][rng.gen_range(0..3)];
            let delay_ms = rng.gen_range(20..=200);
            FaultAction::SlowClient {
                target,
                nodes: names.names(&pick(target, n, rng)),
                delay_ms,
                jitter_ms: delay_ms / 4,
            }
        }
        "strobe-pause" => {
            let target = [Target::One, Target::Follower, Target::Leader][rng.gen_range(0..3)];
            let every_ms = rng.gen_range(200..=1_000);
            FaultAction::StrobePause {
                target,
                nodes: names.names(&pick(target, n, rng)),
                stop_ms: rng.gen_range(10..=every_ms / 4),
                every_ms,
            }
        }
        // "loss", the only kind left after parsing
        _ => {
            let target = [Target::One, Target::All][rng.gen_range(0..2)];
            FaultAction::Loss {
                nodes: names.names(&pick(target, n, rng)),
                fraction: f64::from(rng.gen_range(5u32..=50)) / 100.0,
            }
        }
    }
}

/// A clock fault of `mode` on `target`: its direction, offset, period and nodes drawn
/// from `rng` (the random schedule's ranges; the guided search's too).
pub(crate) fn clock_action(
    mode: ClockMode,
    target: Target,
    names: NodeNames,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> FaultAction {
    let sign = if rng.gen_bool(0.5) { 1 } else { -1 };
    let (offset_ms, period_ms) = match mode {
        ClockMode::Bump => (rng.gen_range(100..=10_000), 0),
        ClockMode::Strobe => (rng.gen_range(100..=2_000), rng.gen_range(50..=500)),
        ClockMode::Skew => (rng.gen_range(10..=200), 100),
    };
    FaultAction::Clock {
        mode,
        target,
        nodes: names.names(&pick(target, n, rng)),
        offset_ms: sign * offset_ms,
        period_ms,
    }
}

/// Random nodes for a target, sorted. `Leader` and `Follower` get no nodes: it is resolved at run time.
pub(crate) fn pick(target: Target, n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let k = match target {
        Target::One => 1,
        Target::Minority => rng.gen_range(1..=((n - 1) / 2).max(1)),
        Target::Majority => n / 2 + 1,
        Target::All => n,
        Target::Leader | Target::Follower | Target::Nodes => 0,
    };
    let mut all: Vec<usize> = (0..n).collect();
    all.shuffle(rng);
    let mut chosen: Vec<usize> = all.into_iter().take(k.min(n)).collect();
    chosen.sort_unstable();
    chosen
}

fn partition(names: NodeNames, n: usize, rng: &mut ChaCha8Rng) -> FaultAction {
    let shape = SHAPES[rng.gen_range(0..SHAPES.len())];
    partition_shape(shape, names, n, rng)
}

/// A partition of the given shape (one of [`SHAPES`]; `majorities-ring` and `bridge`
/// become `random-halves` below 4 nodes), its groups drawn from `rng`.
pub(crate) fn partition_shape(
    shape: &str,
    names: NodeNames,
    n: usize,
    rng: &mut ChaCha8Rng,
) -> FaultAction {
    let mut shape = shape;
    if n < 4 && (shape == "majorities-ring" || shape == "bridge") {
        shape = "random-halves";
    }
    let mode = if rng.gen_range(0..3) == 0 {
        CutMode::Refuse
    } else {
        CutMode::Blackhole
    };
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(rng);
    let sorted = |v: &[usize]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let (groups, blocked): (Vec<Vec<usize>>, Vec<(usize, usize)>) = match shape {
        "halves" => {
            let all: Vec<usize> = (0..n).collect();
            (vec![all[..n / 2].to_vec(), all[n / 2..].to_vec()], vec![])
        }
        "random-halves" => (vec![sorted(&perm[..n / 2]), sorted(&perm[n / 2..])], vec![]),
        "isolate" => (vec![vec![perm[0]], sorted(&perm[1..])], vec![]),
        // Groups are filled in when the fault starts, from who leads then.
        "isolate-leader" => (vec![], vec![]),
        "majority-minority" => {
            let k = rng.gen_range(1..=((n - 1) / 2).max(1));
            (vec![sorted(&perm[..k]), sorted(&perm[k..])], vec![])
        }
        "majorities-ring" => ring(&perm),
        "bridge" => {
            // perm[0] is the bridge: it talks to both sides, which cannot talk to each other
            let rest = &perm[1..];
            let (a, b) = rest.split_at(rest.len() / 2);
            let blocked = a
                .iter()
                .flat_map(|&x| b.iter().flat_map(move |&y| [(x, y), (y, x)]))
                .collect();
            (vec![sorted(a), vec![perm[0]], sorted(b)], blocked)
        }
        // one-way: a minority's messages to the rest are lost; the rest still reach it
        _ => {
            let k = rng.gen_range(1..=((n - 1) / 2).max(1));
            let (from, to) = perm.split_at(k);
            let blocked = from
                .iter()
                .flat_map(|&x| to.iter().map(move |&y| (x, y)))
                .collect();
            (vec![sorted(from), sorted(to)], blocked)
        }
    };
    let mut blocked = blocked;
    blocked.sort_unstable();
    FaultAction::Partition {
        shape: shape.to_string(),
        groups: groups.iter().map(|g| names.names(g)).collect(),
        blocked: blocked
            .iter()
            .map(|&(a, b)| (names.name(a), names.name(b)))
            .collect(),
        mode,
    }
}

/// Majorities ring: nodes sit on a ring in `perm` order and each talks only to the nodes
/// within `reach` ring steps, so every node sees a majority but no two nodes (for n >= 5)
/// see the same majority. Groups list each node's view (the node first).
fn ring(perm: &[usize]) -> (Vec<Vec<usize>>, Vec<(usize, usize)>) {
    let n = perm.len();
    let majority = n / 2 + 1;
    let reach = majority / 2; // 2*reach + 1 >= majority
    let dist = |p: usize, q: usize| {
        let d = p.abs_diff(q);
        d.min(n - d)
    };
    let mut views = Vec::new();
    let mut blocked = Vec::new();
    for p in 0..n {
        let mut view = vec![perm[p]];
        for q in 0..n {
            if q == p {
                continue;
            }
            if dist(p, q) <= reach {
                view.push(perm[q]);
            } else {
                blocked.push((perm[p], perm[q]));
            }
        }
        views.push(view);
    }
    (views, blocked)
}
