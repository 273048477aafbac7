//! Process and clock faults on real child processes (`sleep`), through a small
//! ClusterControl like the harness's: kill -9 / restart, SIGSTOP / SIGCONT, clock offsets.

use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use splitbrain_nemesis::{
    ClusterControl, Nemesis, NemesisError, NemesisRecorder, NemesisSpec, PlannedFault,
};

/// Nodes are `sleep 60` processes; node 2 claims to lead.
struct SleepCluster {
    children: Mutex<Vec<Option<Child>>>,
    offsets: Mutex<Vec<i64>>,
    clock_log: Mutex<Vec<(usize, i64)>>,
    leader: Option<usize>,
}

fn spawn_sleep() -> Child {
    Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep")
}

impl SleepCluster {
    fn new(n: usize, leader: Option<usize>) -> SleepCluster {
        SleepCluster {
            children: Mutex::new((0..n).map(|_| Some(spawn_sleep())).collect()),
            offsets: Mutex::new(vec![0; n]),
            clock_log: Mutex::new(Vec::new()),
            leader,
        }
    }

    fn pid(&self, i: usize) -> Option<u32> {
        self.children.lock().unwrap()[i].as_ref().map(Child::id)
    }

    fn signal(&self, i: usize, sig: i32) -> Result<(), NemesisError> {
        let pid = self
            .pid(i)
            .ok_or_else(|| NemesisError::Fault(format!("n{} is dead", i + 1)))?;
        // SAFETY: plain kill(2) on a child we spawned and have not reaped
        let rc = unsafe { libc::kill(pid as i32, sig) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().into())
        }
    }
}

impl Drop for SleepCluster {
    fn drop(&mut self) {
        for mut c in self.children.lock().unwrap().drain(..).flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl ClusterControl for SleepCluster {
    fn node_count(&self) -> usize {
        self.children.lock().unwrap().len()
    }

    async fn kill(&self, i: usize) -> Result<(), NemesisError> {
        let child = self.children.lock().unwrap()[i].take();
        if let Some(mut c) = child {
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }

    async fn restart(&self, i: usize) -> Result<(), NemesisError> {
        let mut children = self.children.lock().unwrap();
        if children[i].is_none() {
            children[i] = Some(spawn_sleep());
        }
        Ok(())
    }

    async fn pause(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, libc::SIGSTOP)
    }

    async fn resume(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, libc::SIGCONT)
    }

    async fn leaders(&self) -> Vec<usize> {
        self.leader.into_iter().collect()
    }

    async fn set_clock_offset(&self, i: usize, offset_ms: i64) -> Result<(), NemesisError> {
        self.offsets.lock().unwrap()[i] = offset_ms;
        self.clock_log.lock().unwrap().push((i, offset_ms));
        Ok(())
    }
}

#[derive(Default)]
struct Log(Mutex<Vec<(String, Value)>>);

impl NemesisRecorder for Log {
    fn record(&self, f: &str, value: Value) {
        self.0.lock().unwrap().push((f.to_string(), value));
    }
}

impl Log {
    fn fs(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(f, _)| f.clone())
            .collect()
    }
    fn value(&self, f: &str) -> Value {
        let ops = self.0.lock().unwrap();
        ops.iter()
            .find(|(g, _)| g == f)
            .map(|(_, v)| v.clone())
            .unwrap_or(Value::Null)
    }
}

/// The process state letter from /proc/PID/stat ('S' sleeping, 'T' stopped, ...).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the state follows the parenthesised command name
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn wait_state(pid: u32, want: impl Fn(Option<char>) -> bool) -> Option<char> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let s = proc_state(pid);
        if want(s) || Instant::now() > end {
            return s;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn plan_spec(json: &str) -> NemesisSpec {
    let plan: Vec<PlannedFault> = serde_json::from_str(json).unwrap();
    NemesisSpec::from_plan(plan)
}

#[tokio::test]
async fn faults_left_in_place_at_deadline_then_heal_undoes_them() {
    let cluster = SleepCluster::new(3, Some(2));
    let old_n1 = cluster.pid(0).unwrap();
    let n3 = cluster.pid(2).unwrap();
    let nemesis = Nemesis::new(plan_spec(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "kill", "nodes": ["n1"]},
            {"at_ms": 10, "for_ms": 60000, "f": "pause", "target": "leader"},
            {"at_ms": 20, "for_ms": 60000, "f": "clock", "mode": "bump", "nodes": ["n2"], "offset_ms": 5000}]"#,
    ));
    let log = Log::default();
    let t = Instant::now();
    nemesis
        .run(&cluster, &log, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "run overran its duration: {:?}",
        t.elapsed()
    );

    assert_eq!(
        proc_state(old_n1),
        None,
        "n1 (pid {old_n1}) still exists after kill -9"
    );
    assert!(cluster.pid(0).is_none());
    assert_eq!(
        wait_state(n3, |s| s == Some('T')),
        Some('T'),
        "leader n3 not stopped"
    );
    assert_eq!(cluster.offsets.lock().unwrap()[1], 5000);
    assert_eq!(log.fs(), vec!["kill", "pause", "start-clock"]);
    assert_eq!(log.value("kill")["nodes"], serde_json::json!(["n1"]));
    assert_eq!(log.value("pause")["nodes"], serde_json::json!(["n3"]));
    assert_eq!(log.value("pause")["target"], "leader");

    nemesis.heal(&cluster, &log).await.unwrap();
    let new_n1 = cluster.pid(0).expect("n1 restarted");
    assert_ne!(new_n1, old_n1);
    assert!(matches!(proc_state(new_n1), Some('S' | 'R')));
    assert!(
        matches!(wait_state(n3, |s| s != Some('T')), Some('S' | 'R')),
        "n3 not resumed"
    );
    assert_eq!(*cluster.offsets.lock().unwrap(), vec![0, 0, 0]);
    assert_eq!(
        log.fs(),
        vec![
            "kill",
            "pause",
            "start-clock",
            "resume",
            "restart",
            "stop-clock",
            "heal"
        ]
    );
    // a second heal finds nothing to undo and says so
    nemesis.heal(&cluster, &log).await.unwrap();
    assert_eq!(log.fs().last().map(String::as_str), Some("heal"));
    assert_eq!(log.fs().len(), 8);
}

#[tokio::test]
async fn faults_stop_on_schedule_within_the_run() {
    let cluster = SleepCluster::new(3, None);
    let n1 = cluster.pid(0).unwrap();
    let old_n2 = cluster.pid(1).unwrap();
    let nemesis = Nemesis::new(plan_spec(
        r#"[{"at_ms": 0, "for_ms": 150, "f": "kill", "nodes": ["n2"]},
            {"at_ms": 200, "for_ms": 150, "f": "pause", "nodes": ["n1"]},
            {"at_ms": 400, "for_ms": 300, "f": "clock", "mode": "strobe", "nodes": ["n3"],
             "offset_ms": 800, "period_ms": 50}]"#,
    ));
    let log = Log::default();
    let observer = async {
        tokio::time::sleep(Duration::from_millis(275)).await;
        proc_state(n1)
    };
    let (result, mid) = tokio::join!(
        nemesis.run(&cluster, &log, Duration::from_millis(900)),
        observer
    );
    result.unwrap();
    assert_eq!(mid, Some('T'), "n1 was not stopped mid-pause");
    assert!(matches!(
        wait_state(n1, |s| s != Some('T')),
        Some('S' | 'R')
    ));
    let n2 = cluster.pid(1).expect("n2 restarted at its stop time");
    assert_ne!(n2, old_n2);
    assert_eq!(
        log.fs(),
        vec![
            "kill",
            "restart",
            "pause",
            "resume",
            "start-clock",
            "stop-clock"
        ]
    );
    // the strobe flipped n3's clock between 800 and 0 several times, and ended at 0
    let n3_log: Vec<i64> = cluster
        .clock_log
        .lock()
        .unwrap()
        .iter()
        .filter(|(i, _)| *i == 2)
        .map(|&(_, o)| o)
        .collect();
    assert!(n3_log.len() >= 4, "{n3_log:?}");
    // (the stop's reset to 0 may repeat the last strobe value)
    let strobe = &n3_log[..n3_log.len() - 1];
    assert!(strobe.windows(2).all(|w| w[0] != w[1]), "{n3_log:?}");
    assert_eq!(n3_log.last(), Some(&0));
    nemesis.heal(&cluster, &log).await.unwrap();
    assert_eq!(log.fs().last().map(String::as_str), Some("heal"));
}

#[tokio::test]
async fn random_schedule_runs_and_heals_cleanly() {
    let cluster = SleepCluster::new(5, None);
    let spec = NemesisSpec::parse("kill,pause,clock", Duration::from_millis(150), 7).unwrap();
    let nemesis = Nemesis::new(spec);
    let plan = nemesis.schedule(5, Duration::from_millis(1500));
    assert!(plan.len() >= 4, "{plan:?}");
    let log = Log::default();
    nemesis
        .run(&cluster, &log, Duration::from_millis(1500))
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    for i in 0..5 {
        let pid = cluster
            .pid(i)
            .unwrap_or_else(|| panic!("n{} not restarted", i + 1));
        assert!(
            matches!(wait_state(pid, |s| s != Some('T')), Some('S' | 'R')),
            "n{}",
            i + 1
        );
    }
    assert_eq!(*cluster.offsets.lock().unwrap(), vec![0; 5]);
    let fs = log.fs();
    let starts = fs
        .iter()
        .filter(|f| ["kill", "pause", "start-clock"].contains(&f.as_str()))
        .count();
    assert!(starts >= 3, "{fs:?}");
    assert!(
        log.0
            .lock()
            .unwrap()
            .iter()
            .all(|(_, v)| v.get("error").is_none()),
        "{:?}",
        log.0
    );
}

#[tokio::test]
async fn network_faults_without_a_backend_are_recorded_as_failed() {
    let cluster = SleepCluster::new(3, None);
    let nemesis = Nemesis::new(plan_spec(
        r#"[{"at_ms": 0, "for_ms": 50, "f": "partition", "shape": "isolate", "groups": [["n1"], ["n2", "n3"]]}]"#,
    ));
    let log = Log::default();
    nemesis
        .run(&cluster, &log, Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(log.fs(), vec!["start-partition"]);
    assert!(log.value("start-partition")["error"].is_string());
    nemesis.heal(&cluster, &log).await.unwrap();
}

/// The harness may spawn the nemesis on a multi-threaded runtime: its futures must be Send.
#[test]
fn run_and_heal_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let cluster = SleepCluster::new(1, None);
    let nemesis = Nemesis::new(NemesisSpec::parse("kill", Duration::from_secs(1), 0).unwrap());
    let log = Log::default();
    let run = nemesis.run(&cluster, &log, Duration::ZERO);
    assert_send(&run);
    let heal = nemesis.heal(&cluster, &log);
    assert_send(&heal);
}

#[tokio::test]
async fn strobe_pause_stops_a_follower_repeatedly_and_ends_running() {
    // n3 leads, so `follower` resolves to a node that does not: n2.
    let cluster = SleepCluster::new(3, Some(2));
    let n2 = cluster.pid(1).unwrap();
    let nemesis = Nemesis::new(plan_spec(
        r#"[{"at_ms": 0, "for_ms": 300, "f": "strobe-pause", "target": "follower",
             "stop_ms": 40, "every_ms": 100}]"#,
    ));
    // Watch n2's state from another thread while the strobe runs.
    let watcher = std::thread::spawn(move || {
        let (mut stopped, mut running) = (0, 0);
        let end = Instant::now() + Duration::from_millis(280);
        while Instant::now() < end {
            match proc_state(n2) {
                Some('T') => stopped += 1,
                Some(_) => running += 1,
                None => {}
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (stopped, running)
    });
    let log = Log::default();
    nemesis
        .run(&cluster, &log, Duration::from_millis(400))
        .await
        .unwrap();
    let (stopped, running) = watcher.join().unwrap();
    assert!(
        stopped > 0 && running > 0,
        "stopped {stopped}, running {running}"
    );
    assert!(matches!(
        wait_state(n2, |s| s != Some('T')),
        Some('S' | 'R')
    ));
    assert_eq!(log.fs(), vec!["start-strobe-pause", "stop-strobe-pause"]);
    let start = log.value("start-strobe-pause");
    assert_eq!(start["nodes"], serde_json::json!(["n2"]));
    assert_eq!(start["target"], "follower");
    assert_eq!(start["stop_ms"], 40);
    nemesis.heal(&cluster, &log).await.unwrap();
    assert_eq!(log.fs().last().map(String::as_str), Some("heal"));
}

#[tokio::test]
async fn a_strobe_running_at_the_deadline_is_healed_with_its_stop() {
    let cluster = SleepCluster::new(3, Some(0));
    let n1 = cluster.pid(0).unwrap();
    let nemesis = Nemesis::new(plan_spec(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "strobe-pause", "target": "leader",
             "stop_ms": 90, "every_ms": 100}]"#,
    ));
    let log = Log::default();
    nemesis
        .run(&cluster, &log, Duration::from_millis(150))
        .await
        .unwrap();
    nemesis.heal(&cluster, &log).await.unwrap();
    assert!(matches!(
        wait_state(n1, |s| s != Some('T')),
        Some('S' | 'R')
    ));
    let fs = log.fs();
    assert_eq!(fs.first().map(String::as_str), Some("start-strobe-pause"));
    assert!(fs.contains(&"stop-strobe-pause".to_string()), "{fs:?}");
    assert_eq!(fs.last().map(String::as_str), Some("heal"));
}
