//! The node thread's turn loop, the same for every bundled system: wait up to a tick for
//! an event, take what else is queued (bounded), then end the turn: tick the sans-IO
//! core, make its records durable, and only then send its messages and answer clients.
//! Batching a turn's events is what lets one fsync cover many writes.
//!
//! A node implements [`TurnTaker`] and runs [`run_turns`] on its own thread; the loop
//! ends when every sender of its event queue is gone.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How a turn is bounded.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// The longest wait for a first event; bounds the precision of the core's timers.
    pub tick: Duration,
    /// The most events handled in one turn, so a flood cannot starve the tick.
    pub max_batch: usize,
}

/// A node driven by [`run_turns`].
pub trait TurnTaker {
    /// What arrives on the node's queue (peer messages, client requests).
    type Event;
    /// The queue.
    fn inbound(&self) -> &Receiver<Self::Event>;
    /// Feeds one event to the core.
    fn handle(&mut self, event: Self::Event);
    /// After the turn's events: tick, persist, then send and answer.
    fn end_turn(&mut self);
}

/// Runs turns until every sender of the node's queue is dropped.
pub fn run_turns<T: TurnTaker>(node: &mut T, limits: TurnLimits) {
    loop {
        let first = node.inbound().recv_timeout(limits.tick);
        match first {
            Ok(event) => node.handle(event),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        for _ in 0..limits.max_batch {
            let Ok(event) = node.inbound().try_recv() else {
                break;
            };
            node.handle(event);
        }
        node.end_turn();
    }
}

/// Prints why the node cannot go on without its disk and exits with status 2: a node
/// that cannot make a record durable must not answer as if it had.
pub fn storage_failure(program: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("{program}: storage failure, stopping: {e}");
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Sender};

    /// Records what it handled and where each turn ended.
    struct Recorder {
        rx: Receiver<u32>,
        seen: Vec<u32>,
        turns_ended_after: Vec<usize>,
        /// Sends one more event from inside the first turn's end, as a core's own
        /// follow-up would arrive.
        echo: Option<Sender<u32>>,
    }

    impl TurnTaker for Recorder {
        type Event = u32;
        fn inbound(&self) -> &Receiver<u32> {
            &self.rx
        }
        fn handle(&mut self, event: u32) {
            self.seen.push(event);
        }
        fn end_turn(&mut self) {
            self.turns_ended_after.push(self.seen.len());
            if let Some(tx) = self.echo.take() {
                tx.send(99).unwrap();
            }
        }
    }

    #[test]
    fn events_are_handled_in_order_in_bounded_batches_until_the_senders_are_gone() {
        let (tx, rx) = channel();
        for e in 1..=5 {
            tx.send(e).unwrap();
        }
        let mut node = Recorder {
            rx,
            seen: Vec::new(),
            turns_ended_after: Vec::new(),
            echo: Some(tx),
        };
        let limits = TurnLimits {
            tick: Duration::from_millis(1),
            max_batch: 2,
        };
        run_turns(&mut node, limits);
        assert_eq!(node.seen, [1, 2, 3, 4, 5, 99]);
        // Three events a turn at most (the first plus a batch of 2); the echo sent at the
        // first turn's end comes in a later turn, and the loop ends once its sender is
        // dropped and the queue is empty.
        assert_eq!(node.turns_ended_after, [3, 6]);
    }
}
