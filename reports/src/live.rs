//! A running test seen from outside: [`LiveStatus`] (what a run directory's `live.json`
//! holds) and the page `splitbrain serve` shows at `/live/<test>/<run>`, which polls that
//! file once a second and, once the run is checked, its `results.json`.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde::{Deserialize, Serialize};

/// What a running test is doing, as its run directory's `live.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStatus {
    /// `running` during the main phase; `checking` once it ended (heal, final reads, the
    /// whole-history check).
    pub state: String,
    /// Seconds since the main phase began.
    pub elapsed_s: f64,
    /// The main phase's planned length.
    pub time_limit_s: f64,
    /// `ok` completions so far.
    pub ok: u64,
    /// `fail` completions so far.
    pub fail: u64,
    /// `info` completions so far.
    pub info: u64,
    /// The fault in effect (`none` when there is none).
    pub fault: String,
    /// Anomalies the online check has found, one line each, oldest first.
    pub anomalies: Vec<String>,
    /// When this was written (ms since the Unix epoch), to tell a live run from a dead one.
    pub updated_unix_ms: i64,
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}\
th{background:#f3f3f3}.INVALID{color:#b00020;font-weight:600}.valid{color:#17663a}\
.unknown,.stale{color:#8a6d00}#anomalies li{color:#b00020}";

/// The polling script. It fills the page from `live.json` and, once the state is no longer
/// `running`, from `results.json`; it stops polling when the run is checked. A file that
/// is not there yet is waited for, not an error.
const SCRIPT: &str = r#"
const base = document.body.dataset.base;
const $ = id => document.getElementById(id);
let done = false;
// The server's clock (its Date header) tells a stale live.json, not the browser's.
let serverNow = null;
async function fetchJson(name) {
  const r = await fetch(base + '/' + name, {cache: 'no-store'});
  const date = Date.parse(r.headers.get('date') || '');
  serverNow = Number.isNaN(date) ? null : date;
  return r.ok ? r.json() : null;
}
async function tick() {
  try {
    const s = await fetchJson('live.json');
    if (s) {
      const age = serverNow === null ? 0 : (serverNow - s.updated_unix_ms) / 1000;
      const stale = s.state === 'running' && age > 5;
      $('state').textContent = stale ? 'no update for ' + age.toFixed(0) + ' s (the test process may be gone)' : s.state;
      $('state').className = stale ? 'stale' : '';
      $('elapsed').textContent = s.elapsed_s.toFixed(1) + ' s of ' + s.time_limit_s.toFixed(0) + ' s';
      $('ok').textContent = s.ok; $('fail').textContent = s.fail; $('info').textContent = s.info;
      $('fault').textContent = s.fault;
      const list = $('anomalies');
      list.replaceChildren(...s.anomalies.map(a => { const li = document.createElement('li'); li.textContent = a; return li; }));
      $('none-found').hidden = s.anomalies.length > 0;
      if (s.state !== 'running') {
        const r = await fetchJson('results.json');
        if (r) {
          const v = r.valid;
          $('verdict').textContent = v === true ? 'valid' : v === false ? 'INVALID' : String(v);
          $('verdict').className = v === true ? 'valid' : v === false ? 'INVALID' : 'unknown';
          $('report').hidden = false;
          $('state').textContent = 'checked';
          done = true;
        }
      }
    }
    document.body.dataset.polled = String(Number(document.body.dataset.polled || 0) + 1);
  } catch (e) {
    $('state').textContent = 'cannot reach the server: ' + e;
  }
  if (!done) setTimeout(tick, 1000);
}
tick();
"#;

/// The live page of the run at `/runs/<label>` (`label` = `<test>/<run>`).
pub fn live_html(label: &str) -> String {
    let base = format!("/runs/{}", label.trim_end_matches('/'));
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "live: " (label) }
                style { (STYLE) }
            }
            body data-base=(base) {
                h1 { "live: " (label) }
                p { a href="/" { "all runs" } " · " a href={ (base) "/" } { "files" } }
                table {
                    tbody {
                        tr { th { "state" } td id="state" { "waiting for live.json" } }
                        tr { th { "main phase" } td id="elapsed" { "-" } }
                        tr { th { "ok" } td id="ok" { "-" } }
                        tr { th { "fail" } td id="fail" { "-" } }
                        tr { th { "info" } td id="info" { "-" } }
                        tr { th { "fault" } td id="fault" { "-" } }
                        tr { th { "verdict" } td id="verdict" { "not checked yet" } }
                    }
                }
                h2 { "Anomalies found while the test runs" }
                p id="none-found" { "None so far. Only the check of the whole history can say valid." }
                ol id="anomalies" {}
                p id="report" hidden { a href={ (base) "/report.html" } { "the report" } }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    };
    page.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_polls_the_runs_files_and_escapes_its_label() {
        let page = live_html("kv-register/20261204T180000");
        assert!(page.contains(r#"data-base="/runs/kv-register/20261204T180000""#));
        assert!(page.contains("fetchJson('live.json')"));
        assert!(page.contains("fetchJson('results.json')"));
        let hostile = live_html("t/<script>");
        assert!(!hostile.contains("live: t/<script>"));
        assert!(hostile.contains("live: t/&lt;script&gt;"));
    }

    #[test]
    fn a_status_round_trips_through_json() {
        let s = LiveStatus {
            state: "running".into(),
            elapsed_s: 1.5,
            time_limit_s: 30.0,
            ok: 3,
            fail: 1,
            info: 0,
            fault: "none".into(),
            anomalies: vec!["linearizable: key 1 INVALID at 1.0 s".into()],
            updated_unix_ms: 1,
        };
        let back: LiveStatus = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
