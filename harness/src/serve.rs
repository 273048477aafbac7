//! `splitbrain serve`: browse the run store over HTTP — the list of runs (filterable by
//! verdict), each run's report, history, results and node logs, and a running test's
//! live page (`/live/<test>/<run>`, polling the run's `live.json`).
//!
//! Only files inside the store are ever served: a request path with `..`, `.` or a root
//! component (also percent-encoded: the router decodes before we look) is refused, and
//! the resolved file must still lie inside the store after symlinks are followed, so a
//! link pointing out of the store is a 404 too. The store's own `latest` links stay inside
//! and work.

use crate::run::store::{list_running, list_runs, run_time};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use splitbrain_checkers::Validity;
use splitbrain_reports::{directory_html, live_html, store_index_html, IndexedRun};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The HTTP routes over a store directory (`/`, `/runs/<path>`).
pub fn router(store: &Path) -> std::io::Result<Router> {
    let root = Arc::new(std::fs::canonicalize(store)?);
    Ok(Router::new()
        .route("/", get(index))
        .route("/runs", get(index))
        .route("/runs/", get(index))
        .route("/runs/{*path}", get(run_file))
        .route("/live/{*path}", get(live_page))
        .with_state(root))
}

/// Serves `store` on `listener` until `cancel` fires.
pub async fn serve(
    store: &Path,
    listener: TcpListener,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let app = router(store)?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await
}

async fn index(
    State(root): State<Arc<PathBuf>>,
    Query(query): Query<HashMap<String, String>>,
) -> Html<String> {
    let filter = query
        .get("verdict")
        .and_then(|v| match v.to_ascii_lowercase().as_str() {
            "valid" => Some(Validity::Valid),
            "invalid" => Some(Validity::Invalid),
            "unknown" => Some(Validity::Unknown),
            _ => None,
        });
    let root = root.as_ref().clone();
    // Reading every results.json is blocking file work.
    let (runs, running) =
        tokio::task::spawn_blocking(move || (list_runs(&root), list_running(&root)))
            .await
            .unwrap_or_default();
    let indexed: Vec<IndexedRun<'_>> = runs
        .iter()
        .map(|run| IndexedRun {
            run,
            started: run_time(run).map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
        })
        .collect();
    Html(store_index_html(&indexed, &running, filter))
}

/// The live page of a run directory in the store (it polls the run's `live.json`).
async fn live_page(State(root): State<Arc<PathBuf>>, UrlPath(rel): UrlPath<String>) -> Response {
    match resolve_in_store(&root, &rel) {
        Some(dir) if dir.is_dir() => Html(live_html(rel.trim_end_matches('/'))).into_response(),
        _ => not_found(),
    }
}

async fn run_file(State(root): State<Arc<PathBuf>>, UrlPath(rel): UrlPath<String>) -> Response {
    let Some(path) = resolve_in_store(&root, &rel) else {
        return not_found();
    };
    if path.is_dir() {
        let mut entries: Vec<(String, bool)> = match std::fs::read_dir(&path) {
            Ok(rd) => rd
                .flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.path().is_dir(),
                    )
                })
                .collect(),
            Err(_) => return not_found(),
        };
        entries.sort();
        return Html(directory_html(
            &format!("/runs/{}", rel.trim_end_matches('/')),
            &entries,
        ))
        .into_response();
    }
    match tokio::fs::read(&path).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&path))], bytes).into_response(),
        Err(_) => not_found(),
    }
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// The file `rel` names inside the store, or `None` when it does not exist or would
/// leave the store (`..`, absolute paths, symlinks pointing outside).
pub fn resolve_in_store(root: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    let resolved = std::fs::canonicalize(root.join(rel)).ok()?;
    resolved.starts_with(root).then_some(resolved)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "xml" => "application/xml",
        "jsonl" | "log" | "txt" | "edn" | "toml" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_only_inside_the_store() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let store = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(store.path()).unwrap();
        std::fs::create_dir_all(root.join("t/1")).unwrap();
        std::fs::write(root.join("t/1/report.html"), "r").unwrap();
        std::os::unix::fs::symlink("1", root.join("t/latest")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("t/1/escape")).unwrap();
        assert_eq!(
            resolve_in_store(&root, "t/1/report.html"),
            Some(root.join("t/1/report.html"))
        );
        assert_eq!(
            resolve_in_store(&root, "t/latest/report.html"),
            Some(root.join("t/1/report.html"))
        );
        for bad in [
            "",
            "../x",
            "t/../../secret",
            "/etc/passwd",
            "t/1/escape",
            "t/2",
        ] {
            assert_eq!(resolve_in_store(&root, bad), None, "{bad}");
        }
    }
}
