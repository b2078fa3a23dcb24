//! A guard in front of the protocol library: it reads the client's frames itself and answers
//! malformed ones (bad JSON, not JSON-RPC) with a JSON-RPC error, so the library — whose reader
//! stops at the first undecodable frame — only ever sees well-formed messages. Output frames from
//! the library and from the guard are written whole, never interleaved.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Largest frame accepted (a bigger Content-Length is answered with an error and skipped).
const MAX_FRAME: usize = 64 << 20;

async fn read_frame<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> std::io::Result<Option<Result<Vec<u8>, String>>> {
    let mut len: Option<usize> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().ok();
        }
    }
    let Some(len) = len else { return Ok(Some(Err("missing Content-Length header".into()))) };
    if len > MAX_FRAME {
        let mut skip = (&mut *r).take(len as u64);
        tokio::io::copy(&mut skip, &mut tokio::io::sink()).await?;
        return Ok(Some(Err(format!("message of {len} bytes is over the {MAX_FRAME}-byte limit"))));
    }
    let mut buf = vec![0; len];
    r.read_exact(&mut buf).await?;
    Ok(Some(Ok(buf)))
}

async fn write_frame<W: AsyncWrite + Unpin>(w: &Mutex<W>, body: &[u8]) -> std::io::Result<()> {
    let mut w = w.lock().await;
    w.write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes()).await?;
    w.write_all(body).await?;
    w.flush().await
}

fn error(id: serde_json::Value, code: i64, message: &str) -> Vec<u8> {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string().into_bytes()
}

/// Checks a frame is a JSON-RPC 2.0 message; the error response to send if not. `Ok(Some(..))`
/// is the frame to forward instead: a `lode/*` request with no `params` member gets
/// `"params": null`, since lode's own requests take optional params and the library refuses a
/// missing member for a handler that takes any ("No params" in docs/lsp-extensions.md means
/// either is fine).
fn check(body: &[u8]) -> Result<Option<Vec<u8>>, Vec<u8>> {
    let v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Err(error(serde_json::Value::Null, -32700, &format!("Parse error: {e}"))),
    };
    let id = v.get("id").cloned().unwrap_or(serde_json::Value::Null);
    let ok = v.is_object()
        && v.get("jsonrpc").and_then(|j| j.as_str()) == Some("2.0")
        && (v.get("method").is_some_and(|m| m.is_string())
            || (v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())))
        && v.get("params").is_none_or(|p| p.is_object() || p.is_array() || p.is_null());
    if ok {
        let lode_request = v.get("method").and_then(|m| m.as_str()).is_some_and(|m| m.starts_with("lode/"));
        if lode_request && v.get("params").is_none() {
            let mut v = v;
            v["params"] = serde_json::Value::Null;
            return Ok(Some(v.to_string().into_bytes()));
        }
        Ok(None)
    } else {
        Err(error(id, -32600, "Invalid Request: not a JSON-RPC 2.0 message"))
    }
}

/// Pumps `input` → the library (through `to_lib`), and the library's output (`from_lib`) →
/// `output`, answering malformed frames on the way.
pub async fn guard<I, O, L, M>(input: I, output: O, mut to_lib: L, from_lib: M)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    L: AsyncWrite + Unpin + Send + 'static,
    M: AsyncRead + Unpin + Send + 'static,
{
    let out = Arc::new(Mutex::new(output));
    let out2 = out.clone();
    let forward_out = tokio::spawn(async move {
        let mut r = BufReader::new(from_lib);
        while let Ok(Some(Ok(frame))) = read_frame(&mut r).await {
            if write_frame(&out2, &frame).await.is_err() {
                break;
            }
        }
    });
    let mut r = BufReader::new(input);
    loop {
        match read_frame(&mut r).await {
            Ok(Some(Ok(frame))) => match check(&frame) {
                Ok(rewritten) => {
                    let frame = rewritten.unwrap_or(frame);
                    let header = format!("Content-Length: {}\r\n\r\n", frame.len());
                    if to_lib.write_all(header.as_bytes()).await.is_err() || to_lib.write_all(&frame).await.is_err() {
                        break;
                    }
                    let _ = to_lib.flush().await;
                }
                Err(reply) => {
                    tracing::warn!("answered a malformed message with an error");
                    let _ = write_frame(&out, &reply).await;
                }
            },
            Ok(Some(Err(why))) => {
                let _ = write_frame(&out, &error(serde_json::Value::Null, -32700, &why)).await;
            }
            // The client went away (end of input or a broken pipe): let the library wind down.
            Ok(None) | Err(_) => break,
        }
    }
    drop(to_lib);
    let _ = forward_out.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{}}"#).is_ok());
        assert!(check(br#"{"jsonrpc":"2.0","method":"initialized"}"#).is_ok());
        assert!(check(br#"{"jsonrpc":"2.0","id":3,"result":null}"#).is_ok());
        let e: serde_json::Value = serde_json::from_slice(&check(b"{nope").unwrap_err()).unwrap();
        assert_eq!(e["error"]["code"], -32700);
        let e: serde_json::Value = serde_json::from_slice(&check(br#"{"jsonrpc":"2.0","id":7}"#).unwrap_err()).unwrap();
        assert_eq!((e["error"]["code"].as_i64(), e["id"].as_i64()), (Some(-32600), Some(7)));
        assert!(check(br#"[1,2]"#).is_err());
        assert!(check(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).is_err());
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":5}"#).is_err());
        // lode's requests: no params member reads as null params; others pass untouched.
        let fixed = check(br#"{"jsonrpc":"2.0","id":4,"method":"lode/status"}"#).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        assert!(v["params"].is_null() && v.as_object().unwrap().contains_key("params") && v["id"] == 4);
        assert_eq!(check(br#"{"jsonrpc":"2.0","id":5,"method":"lode/status","params":{}}"#).unwrap(), None);
        assert_eq!(check(br#"{"jsonrpc":"2.0","id":6,"method":"shutdown"}"#).unwrap(), None);
    }
}
