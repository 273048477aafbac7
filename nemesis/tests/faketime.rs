//! libfaketime clock offsets observed by a real running process (this test binary,
//! re-run as a helper). Skips when libfaketime is not installed.

use crate::skip;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use splitbrain_nemesis::faketime::FaketimeClocks;

const HELPER_ENV: &str = "SB_NEMESIS_CLOCK_GO_FILE";

/// The name libtest knows this module's test `name` by (its module path within the test
/// binary, which `--exact` needs).
fn test_name(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Not a test of its own: with the env var set, prints its wall clock, waits for the go
/// file (at most 10 s), and prints its wall clock again.
#[test]
fn helper_print_clock() {
    let Ok(go) = std::env::var(HELPER_ENV) else {
        return;
    };
    println!("CLOCK {}", now_ms());
    let end = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new(&go).exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("CLOCK {}", now_ms());
}

#[test]
fn offset_moves_a_running_process_clock() {
    if FaketimeClocks::library().is_none() {
        skip::skip_here("libfaketime (Debian package faketime) is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sb-nemesis-faketime-{}", std::process::id()));
    let clocks = FaketimeClocks::new(&dir, 2).unwrap();
    let go = dir.join("go");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name("helper_print_clock"),
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(clocks.env(1))
        .env(HELPER_ENV, &go)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut clock_lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        // libtest may print "test helper_print_clock ... " on the same line first
        .filter_map(|l| {
            l.split("CLOCK ")
                .nth(1)
                .and_then(|v| v.trim().parse::<i64>().ok())
        });
    let before = clock_lines.next().expect("first clock line");
    let real_before = now_ms();
    clocks.set_offset(1, 3_600_000).unwrap();
    std::fs::write(&go, "go").unwrap();
    let after = clock_lines.next().expect("second clock line");
    let real_after = now_ms();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    println!(
        "FIGURES faketime: node clock moved {} ms while real time moved {} ms (offset +3600000 ms)",
        after - before,
        real_after - real_before
    );
    assert!(
        (before - real_before).abs() < 2_000,
        "offset 0 was not neutral"
    );
    let skew = (after - before) - (real_after - real_before);
    assert!((skew - 3_600_000).abs() < 2_000, "skew {skew} ms");
}
