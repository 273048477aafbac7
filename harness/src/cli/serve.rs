//! `splitbrain serve`: browse the run store over loopback HTTP.

use super::runtime;
use anyhow::Context;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The run store to browse.
    #[arg(long, default_value = "store")]
    store: PathBuf,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
}

pub(crate) fn cmd_serve(a: ServeArgs) -> anyhow::Result<u8> {
    if !a.store.is_dir() {
        return Err(super::usage(format!(
            "{} is not a directory (the run store `splitbrain test --store` writes)",
            a.store.display()
        )));
    }
    let rt = runtime()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        let addr = listener.local_addr()?;
        println!("serving {} at http://{addr}/", a.store.display());
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.cancel();
            }
        });
        crate::serve::serve(&a.store, listener, cancel)
            .await
            .context("serving the store")
    })?;
    Ok(0)
}
