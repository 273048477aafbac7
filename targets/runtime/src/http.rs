//! The JSON-over-HTTP front of every reference system, and the clock admin endpoint.
//!
//! A target writes one handler from [`Request`] to [`Response`] (a status and a JSON
//! body); [`serve`] runs it behind axum/hyper, which speak HTTP/1.1 (keep-alive,
//! pipelining, chunked bodies, `Expect: 100-continue`).

use crate::clock::OffsetClock;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::{json, Value};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Largest accepted request body, in bytes.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// One parsed HTTP request.
#[derive(Debug, Clone)]
pub struct Request {
    /// Method, upper case as sent (`GET`, `POST`).
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Raw body bytes.
    pub body: Vec<u8>,
}

/// One HTTP response: a status and a JSON body.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// JSON body.
    pub body: Value,
}

impl Response {
    /// A 200 response with this JSON body.
    pub fn ok(body: Value) -> Self {
        Response { status: 200, body }
    }

    /// The 404 answer for a method and path the server does not serve.
    pub fn no_route(req: &Request) -> Self {
        Response::error(
            404,
            "bad-request",
            format!("no route {} {}", req.method, req.path),
        )
    }

    /// An error response: `{"type":"fail","error":error,"detail":detail}` with this status.
    pub fn error(status: u16, error: &str, detail: impl Into<String>) -> Self {
        Response {
            status,
            body: json!({"type": "fail", "error": error, "detail": detail.into()}),
        }
    }
}

/// Serves HTTP on `listener` forever, calling `handler` for each request. HTTP itself
/// (keep-alive, pipelining, chunked bodies, `Expect: 100-continue`) is axum's and
/// hyper's; every request reaches `handler` as a [`Request`], whatever its path.
pub async fn serve<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handler = Arc::new(handler);
    let app = Router::new().fallback(move |req: axum::extract::Request| {
        let handler = handler.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = match axum::body::to_bytes(body, MAX_BODY).await {
                Ok(b) => b.to_vec(),
                Err(e) => {
                    return reply(Response::error(
                        413,
                        "bad-request",
                        format!("request body unreadable or over {MAX_BODY} bytes: {e}"),
                    ))
                }
            };
            reply(
                handler(Request {
                    method: parts.method.as_str().to_string(),
                    path: parts.uri.path().to_string(),
                    body,
                })
                .await,
            )
        }
    });
    // Small JSON requests on keep-alive connections: Nagle's delay would add tens of ms.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // axum::serve retries failed accepts itself (after a pause); it never ends on its own.
    let _ = axum::serve(listener, app).await;
}

fn reply(resp: Response) -> axum::response::Response {
    let status = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(resp.body)).into_response()
}

/// Serves the clock admin endpoint if `req` is for it, else returns `None`.
///
/// - `GET /admin/clock` -> `{"offset_ms": .., "now_ms": ..}`
/// - `POST /admin/clock {"offset_ms": -300}` sets the offset -> `{"offset_ms": -300}`
pub fn clock_admin(clock: &OffsetClock, req: &Request) -> Option<Response> {
    if req.path != "/admin/clock" {
        return None;
    }
    Some(match req.method.as_str() {
        "GET" => Response::ok(json!({"offset_ms": clock.offset_ms(), "now_ms": clock.now_ms()})),
        "POST" => {
            let parsed: Result<Value, _> = serde_json::from_slice(&req.body);
            match parsed
                .ok()
                .and_then(|v| v.get("offset_ms").and_then(Value::as_i64))
            {
                Some(offset) => {
                    clock.set_offset_ms(offset);
                    Response::ok(json!({"offset_ms": offset}))
                }
                None => Response::error(400, "bad-request", "expected {\"offset_ms\": <integer>}"),
            }
        }
        _ => Response::error(405, "bad-request", "use GET or POST"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[tokio::test]
    async fn serves_keep_alive_and_chunked() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, |req: Request| async move {
            Response::ok(json!({"path": req.path, "len": req.body.len()}))
        }));
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"POST /a?x=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
            .await
            .unwrap();
        s.write_all(b"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n0\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.contains(r#"{"len":3,"path":"/a"}"#), "{out}");
        assert!(out.contains(r#"{"len":2,"path":"/b"}"#), "{out}");
    }

    #[test]
    fn clock_admin_sets_offset() {
        let clock = OffsetClock::new();
        let req = Request {
            method: "POST".into(),
            path: "/admin/clock".into(),
            body: br#"{"offset_ms": -300}"#.to_vec(),
        };
        let resp = clock_admin(&clock, &req).unwrap();
        assert_eq!(resp.body["offset_ms"], -300);
        assert_eq!(clock.offset_ms(), -300);
    }
}
