//! Makes N namespace "hosts" on this machine, each with its own sshd, writes a hosts file
//! for `splitbrain test --hosts`, and removes everything again on Ctrl-C or when its
//! standard input closes (root, sshd and nftables needed).
//!
//! ```text
//! cargo run --release --example ssh_hosts -- 5 /tmp/hosts.toml
//! ```

use splitbrain::remote::testbed::{unavailable_reason, SshTestbed};
use std::io::Read;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(path)) = (
        args.first().and_then(|n| n.parse::<usize>().ok()),
        args.get(1),
    ) else {
        eprintln!("usage: ssh_hosts N HOSTS_FILE");
        return std::process::ExitCode::from(2);
    };
    if let Some(why) = unavailable_reason() {
        eprintln!("ssh_hosts: cannot make namespace hosts here: {why}");
        return std::process::ExitCode::from(4);
    }
    let bed = match SshTestbed::create(n) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ssh_hosts: {e}");
            return std::process::ExitCode::from(4);
        }
    };
    if let Err(e) = bed.write_hosts_file(std::path::Path::new(path), None) {
        eprintln!("ssh_hosts: writing {path}: {e}");
        return std::process::ExitCode::from(4);
    }
    for i in 0..bed.len() {
        eprintln!(
            "host {}: {} (data {})",
            i + 1,
            bed.addr(i),
            bed.data_dir(i).display()
        );
    }
    eprintln!("ssh_hosts: wrote {path}; Ctrl-C or end of input removes the hosts");
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ssh_hosts: {e}");
            return std::process::ExitCode::from(4);
        }
    };
    rt.block_on(async {
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        });
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = stdin_closed => {}
        }
    });
    // The stdin reader may still be blocked; it must not hold the teardown up.
    rt.shutdown_background();
    for i in 0..bed.len() {
        for left in bed.leftovers(i) {
            eprintln!("host {}: left behind: {left}", i + 1);
        }
    }
    drop(bed);
    eprintln!("ssh_hosts: removed");
    std::process::ExitCode::SUCCESS
}
