//! Command-line conventions shared by bundled targets.
//!
//! Every bundled server takes `--id N`, `--client-listen ADDR`, `--peer-listen ADDR`, one
//! `--peer J=ADDR` per other node (where THIS node dials node J: the harness may put a
//! proxy there, so the address differs per sender), `--data-dir DIR` and `--bug NAME`.

/// Runs a server's async `main` on a multi-threaded tokio runtime. If the runtime cannot
/// start or `run` fails, prints `program: error` to stderr and exits with status 1.
pub fn run_server<F>(program: &str, run: F)
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{program}: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run) {
        eprintln!("{program}: {e}");
        std::process::exit(1);
    }
}

/// Parses a `--peer` value of the form `ID=HOST:PORT` into `(id, "HOST:PORT")`.
/// Usable as a clap `value_parser`.
pub fn parse_peer(s: &str) -> Result<(u64, String), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ID=HOST:PORT, got {s:?}"))?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|e| format!("bad peer id in {s:?}: {e}"))?;
    let addr = addr.trim();
    if addr.is_empty() || !addr.contains(':') {
        return Err(format!("bad peer address in {s:?}: expected HOST:PORT"));
    }
    Ok((id, addr.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_peers() {
        assert_eq!(
            parse_peer("2=127.0.0.1:9012"),
            Ok((2, "127.0.0.1:9012".to_string()))
        );
        assert!(parse_peer("x=1:2").is_err());
        assert!(parse_peer("2").is_err());
        assert!(parse_peer("2=").is_err());
    }
}
