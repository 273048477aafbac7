//! The client API: `GET /health`, `GET /status`, `POST /steps`, `GET|POST /admin/clock`.

use crate::node::Shared;
use serde_json::{json, Value};
use splitbrain_target_runtime::http::{clock_admin, Request, Response};
use splitbrain_target_runtime::OffsetClock;
use std::time::Duration;

/// Longest long-poll a client may ask for.
const MAX_WAIT_MS: u64 = 30_000;

/// What the handlers share.
#[derive(Clone, Debug)]
pub struct Api {
    /// Rank (0-based).
    pub rank: u64,
    /// World size.
    pub world: u64,
    /// Bugs turned on.
    pub bugs: Vec<String>,
    /// The node's clock.
    pub clock: OffsetClock,
    /// The driver's published state.
    pub shared: Shared,
}

impl Api {
    /// Answers one request.
    pub async fn handle(&self, req: Request) -> Response {
        if let Some(resp) = clock_admin(&self.clock, &req) {
            return resp;
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => Response::ok(json!({"ok": true, "rank": self.rank})),
            ("GET", "/status") => Response::ok(self.status()),
            ("POST", "/steps") => match parse_steps(&req.body) {
                Ok((after, wait, max)) => Response::ok(self.steps(after, wait, max).await),
                Err(e) => Response::error(400, "bad-request", e),
            },
            _ => Response::no_route(&req),
        }
    }

    fn status(&self) -> Value {
        let st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let (gen, phase, step, committed) = st.status.clone();
        let (compute_ms, exposed_ms, steps) = st.timing;
        json!({
            "rank": self.rank, "world": self.world, "bugs": self.bugs,
            "gen": gen, "phase": phase, "step": step, "committed": committed,
            "compute_ms_per_step": compute_ms, "exposed_allreduce_ms_per_step": exposed_ms,
            "timed_steps": steps,
        })
    }

    fn after(&self, after: u64, max: usize) -> Vec<Value> {
        let st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let start = st.steps.partition_point(|r| r.step <= after);
        st.steps[start..]
            .iter()
            .take(max)
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect()
    }

    /// Committed steps after `after` (at most `max`), waiting up to `wait` for one.
    async fn steps(&self, after: u64, wait: Duration, max: usize) -> Value {
        let mut rx = self.shared.commits.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let found = self.after(after, max);
            if !found.is_empty() {
                return json!({"type": "ok", "steps": found});
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return json!({"type": "ok", "steps": []}),
            }
        }
    }
}

/// `{"after": N, "wait_ms": M, "max": K}` (all optional).
pub fn parse_steps(body: &[u8]) -> Result<(u64, Duration, usize), String> {
    let v: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?
    };
    let field = |name: &str, default: u64| match v.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(x) => x
            .as_u64()
            .ok_or(format!("{name} must be a non-negative integer")),
    };
    let after = field("after", 0)?;
    let wait = field("wait_ms", 0)?.min(MAX_WAIT_MS);
    let max = field("max", 1000)?.max(1) as usize;
    Ok((after, Duration::from_millis(wait), max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_step_queries() {
        assert_eq!(parse_steps(b"").unwrap(), (0, Duration::ZERO, 1000));
        assert_eq!(
            parse_steps(br#"{"after":5,"wait_ms":200,"max":1}"#).unwrap(),
            (5, Duration::from_millis(200), 1)
        );
        assert!(parse_steps(br#"{"after":-1}"#).is_err());
        assert!(parse_steps(b"x").is_err());
    }
}
