//! A tiny HTTP/1.1 server for JSON APIs, and the clock admin endpoint.
//!
//! Supports what the harness's client and `curl` send: one request at a time per
//! connection with keep-alive, `Content-Length` or chunked request bodies, and
//! `Expect: 100-continue`. Every response carries a JSON body and a `Content-Length`.

use crate::clock::OffsetClock;
use serde_json::{json, Value};
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Largest accepted request head (request line plus headers), in bytes.
const MAX_HEAD: usize = 64 * 1024;
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

/// Serves HTTP on `listener` forever, calling `handler` for each request. Each connection
/// runs in its own task; a broken connection only ends that task.
pub async fn serve<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handler = Arc::new(handler);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors or similar: back off instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        tokio::spawn(async move {
            let _ = serve_connection(stream, handler).await;
        });
    }
}

async fn serve_connection<F, Fut>(stream: TcpStream, handler: Arc<F>) -> std::io::Result<()>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let (read_half, mut write_half) = stream.into_split();
    let mut reader = BufReader::new(read_half);
    loop {
        let parsed = match read_request(&mut reader, &mut write_half).await {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(()),
            Err(RequestError::Io(e)) => return Err(e),
            Err(RequestError::Bad(detail)) => {
                let resp = Response::error(400, "bad-request", detail);
                write_response(&mut write_half, &resp, false).await?;
                return Ok(());
            }
        };
        let (request, keep_alive) = parsed;
        let resp = handler(request).await;
        write_response(&mut write_half, &resp, keep_alive).await?;
        if !keep_alive {
            return Ok(());
        }
    }
}

enum RequestError {
    Io(std::io::Error),
    Bad(String),
}

impl From<std::io::Error> for RequestError {
    fn from(e: std::io::Error) -> Self {
        RequestError::Io(e)
    }
}

/// Reads one request; `Ok(None)` on a clean end of stream between requests.
async fn read_request<R, W>(
    reader: &mut BufReader<R>,
    writer: &mut W,
) -> Result<Option<(Request, bool)>, RequestError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut line = String::new();
    let mut head_len = 0usize;
    // Skip blank lines between requests (tolerated by RFC 9112).
    loop {
        line.clear();
        let n = reader.read_line(&mut line).await?;
        if n == 0 {
            return Ok(None);
        }
        head_len += n;
        if head_len > MAX_HEAD {
            return Err(RequestError::Bad("request head too large".into()));
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let version = parts.next().unwrap_or_default().to_string();
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(RequestError::Bad(format!(
            "bad request line {:?}",
            line.trim()
        )));
    }
    let mut keep_alive = version != "HTTP/1.0";
    let mut content_length = 0usize;
    let mut chunked = false;
    let mut expect_continue = false;
    loop {
        line.clear();
        let n = reader.read_line(&mut line).await?;
        if n == 0 {
            return Err(RequestError::Bad("end of stream inside headers".into()));
        }
        head_len += n;
        if head_len > MAX_HEAD {
            return Err(RequestError::Bad("request head too large".into()));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(RequestError::Bad(format!("bad header {header:?}")));
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        match name.as_str() {
            "content-length" => {
                content_length = value
                    .parse()
                    .map_err(|_| RequestError::Bad(format!("bad content-length {value:?}")))?;
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "connection" => {
                let v = value.to_ascii_lowercase();
                if v.contains("close") {
                    keep_alive = false;
                } else if v.contains("keep-alive") {
                    keep_alive = true;
                }
            }
            "expect" => expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
    if expect_continue {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        writer.flush().await?;
    }
    let body = if chunked {
        read_chunked(reader).await?
    } else {
        if content_length > MAX_BODY {
            return Err(RequestError::Bad("body too large".into()));
        }
        let mut body = vec![0u8; content_length];
        reader.read_exact(&mut body).await?;
        body
    };
    let path = target.split('?').next().unwrap_or("/").to_string();
    Ok(Some((Request { method, path, body }, keep_alive)))
}

async fn read_chunked<R>(reader: &mut BufReader<R>) -> Result<Vec<u8>, RequestError>
where
    R: tokio::io::AsyncRead + Unpin,
{
    let mut body = Vec::new();
    let mut line = String::new();
    // Bounded: every chunk adds at least one byte or ends the body, and MAX_BODY caps it.
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Err(RequestError::Bad(
                "end of stream inside chunked body".into(),
            ));
        }
        let size_text = line.trim().split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| RequestError::Bad(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailers until a blank line.
            for _ in 0..128 {
                line.clear();
                if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
            return Err(RequestError::Bad("too many trailers".into()));
        }
        if body.len() + size > MAX_BODY {
            return Err(RequestError::Bad("body too large".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        line.clear();
        reader.read_line(&mut line).await?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

async fn write_response<W>(writer: &mut W, resp: &Response, keep_alive: bool) -> std::io::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let body = serde_json::to_vec(&resp.body).unwrap_or_else(|_| b"null".to_vec());
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        resp.status,
        reason(resp.status),
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(&body);
    writer.write_all(&out).await?;
    writer.flush().await
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
    use tokio::io::AsyncReadExt;

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
