//! The message-size limit of the stdio transport. MCP over stdio sends one JSON-RPC message per
//! line. rmcp drops a line longer than its limit (16 MiB) with a log line nobody sees, and the
//! client then waits forever for an answer. [`guard`] sits between the protocol's streams and
//! rmcp instead: it passes whole lines of at most [`MAX_MESSAGE_BYTES`] on, discards a longer
//! one as it arrives (memory stays bounded), and answers it itself with a JSON-RPC error that
//! names the limit, carrying the request's `id` when the line's first bytes hold it (else
//! `null`, as JSON-RPC 2.0 prescribes when the ID cannot be told). It also owns stdout: rmcp
//! writes into a pipe whose lines this layer copies to stdout whole, and its own error lines go
//! between them, so stdout stays protocol-only and line-atomic.

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::report::Reporter;

/// The largest JSON-RPC message (one line, without its line break) the server reads: 16 MiB,
/// as rmcp's own limit and its HTTP transport's largest event.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How much of the start of an oversized line is kept to find its `id`.
const ID_SCAN_BYTES: usize = 64 * 1024;

/// JSON-RPC 2.0's "Invalid Request" error code.
const INVALID_REQUEST: i64 = -32600;

/// Bytes read from the input at once, and the buffer of the pipes to and from rmcp.
const CHUNK: usize = 64 * 1024;

/// The two pipes rmcp reads and writes, and the tasks that connect them to the real streams.
pub(crate) struct Guarded {
    /// What rmcp reads: the input's lines of at most [`MAX_MESSAGE_BYTES`].
    pub input: DuplexStream,
    /// What rmcp writes: copied to the output line by line.
    pub output: DuplexStream,
    /// The task copying rmcp's lines (and the errors of this layer) to the output; it ends once
    /// rmcp's side is dropped and everything is written.
    pub writer: JoinHandle<()>,
}

/// Connects `input` and `output` (the protocol's streams) to rmcp through the limit (see the
/// module documentation). A refused message is also reported to `reporter` (stderr).
pub(crate) fn guard(
    input: impl AsyncRead + Send + Unpin + 'static,
    output: impl AsyncWrite + Send + Unpin + 'static,
    reporter: Arc<dyn Reporter>,
) -> Guarded {
    let (to_rmcp, rmcp_input) = tokio::io::duplex(CHUNK);
    let (rmcp_output, from_rmcp) = tokio::io::duplex(CHUNK);
    let (errors_tx, errors_rx) = mpsc::unbounded_channel();
    tokio::spawn(read_lines(input, to_rmcp, errors_tx, reporter));
    let writer = tokio::spawn(write_lines(from_rmcp, errors_rx, output));
    Guarded {
        input: rmcp_input,
        output: rmcp_output,
        writer,
    }
}

/// Copies the lines of `input` of at most [`MAX_MESSAGE_BYTES`] to `to_rmcp`; sends the error
/// response for each longer one to `errors`. At the input's end (or rmcp's) it drops `to_rmcp`,
/// which rmcp sees as the end of the session; an unfinished last line is dropped, as rmcp
/// drops it.
async fn read_lines(
    mut input: impl AsyncRead + Unpin,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<Vec<u8>>,
    reporter: Arc<dyn Reporter>,
) {
    let mut line: Vec<u8> = Vec::new();
    // Bytes of the line being discarded (it outgrew the limit); `line` then keeps its start.
    let mut oversized: Option<usize> = None;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match input.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let end = memchr::memchr(b'\n', rest);
            let piece = &rest[..end.unwrap_or(rest.len())];
            rest = &rest[end.map_or(rest.len(), |i| i + 1)..];
            match &mut oversized {
                Some(total) => {
                    *total += piece.len();
                    let room = ID_SCAN_BYTES.saturating_sub(line.len()).min(piece.len());
                    line.extend_from_slice(&piece[..room]);
                }
                None if line.len() + piece.len() > MAX_MESSAGE_BYTES + 1 => {
                    // (+1: a CR before the line break does not count.)
                    let total = line.len() + piece.len();
                    line.truncate(ID_SCAN_BYTES);
                    let room = ID_SCAN_BYTES.saturating_sub(line.len()).min(piece.len());
                    line.extend_from_slice(&piece[..room]);
                    oversized = Some(total);
                }
                None => line.extend_from_slice(piece),
            }
            if end.is_none() {
                continue;
            }
            let body = line.strip_suffix(b"\r").unwrap_or(&line).len();
            let refused = match oversized.take() {
                Some(total) => Some(total),
                None if body > MAX_MESSAGE_BYTES => Some(body),
                None => None,
            };
            match refused {
                Some(total) => {
                    let id = request_id(&line);
                    reporter.warn(&format!(
                        "mcp: refused a message of {total} bytes (request id {id}): more than the limit of {MAX_MESSAGE_BYTES} bytes"
                    ));
                    if errors.send(too_large(id, total)).is_err() {
                        return;
                    }
                }
                None => {
                    line.push(b'\n');
                    if to_rmcp.write_all(&line).await.is_err() {
                        return;
                    }
                }
            }
            line.clear();
        }
    }
}

/// The error response to an oversized message of `total` bytes with request `id`, one line.
fn too_large(id: Value, total: usize) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": INVALID_REQUEST,
            "message": format!(
                "the message of {total} bytes is larger than this server's limit of {MAX_MESSAGE_BYTES} bytes (16 MiB) per JSON-RPC message, so it was not processed; send less at once (e.g. a large file in parts with sandbox_write's append)"
            ),
            "data": {"limit_bytes": MAX_MESSAGE_BYTES, "message_bytes": total},
        },
    }))
    .expect("a JSON value serializes");
    line.push(b'\n');
    line
}

/// Copies the lines rmcp writes to `output`, whole, and the error lines of `errors` between
/// them, until rmcp's side ends (then what is left is written and flushed) or `output` fails.
async fn write_lines(
    mut from_rmcp: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: impl AsyncWrite + Unpin,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    let mut errors_open = true;
    loop {
        tokio::select! {
            n = from_rmcp.read(&mut chunk) => {
                let n = match n {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&chunk[..n]);
                if let Some(last) = memchr::memrchr(b'\n', &pending) {
                    let whole: Vec<u8> = pending.drain(..=last).collect();
                    if output.write_all(&whole).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
            }
            e = errors.recv(), if errors_open => match e {
                Some(line) => {
                    if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
                None => errors_open = false,
            },
        }
    }
    // rmcp has finished; its unterminated last bytes (none, normally) go out as they are.
    if !pending.is_empty() {
        let _ = output.write_all(&pending).await;
    }
    let _ = output.flush().await;
}

/// The `id` of the JSON-RPC request whose first bytes are `start` (the line may be cut): a
/// number or a string found as a member of the top-level object before the cut; `null` when
/// there is none there (a notification, an `id` after the cut, not an object).
pub(crate) fn request_id(start: &[u8]) -> Value {
    let mut s = Scanner { b: start, i: 0 };
    s.ws();
    if !s.eat(b'{') {
        return Value::Null;
    }
    loop {
        s.ws();
        let Some(key) = s.string() else {
            return Value::Null;
        };
        s.ws();
        if !s.eat(b':') {
            return Value::Null;
        }
        s.ws();
        if key == "id" {
            let mut values =
                serde_json::Deserializer::from_slice(&start[s.i..]).into_iter::<Value>();
            return match values.next() {
                Some(Ok(v @ (Value::Number(_) | Value::String(_)))) => v,
                _ => Value::Null,
            };
        }
        if !s.skip_value() {
            return Value::Null;
        }
        s.ws();
        if !s.eat(b',') {
            return Value::Null;
        }
    }
}

/// A cursor over possibly cut JSON; every method fails (or stops) at the end of the bytes.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Skips a string starting here; `false` when it is cut.
    fn skip_string(&mut self) -> bool {
        if !self.eat(b'"') {
            return false;
        }
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'"' => return self.i <= self.b.len(),
                _ => {}
            }
        }
        false
    }

    /// A whole string starting here, decoded.
    fn string(&mut self) -> Option<String> {
        let from = self.i;
        if !self.skip_string() {
            return None;
        }
        serde_json::from_slice(&self.b[from..self.i]).ok()
    }

    /// Skips one value (object, array, string or scalar); `false` when it is cut.
    fn skip_value(&mut self) -> bool {
        match self.peek() {
            Some(b'"') => self.skip_string(),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    match c {
                        b'"' => {
                            if !self.skip_string() {
                                return false;
                            }
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return true;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                false
            }
            Some(_) => {
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        return true;
                    }
                    self.i += 1;
                }
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_found_in_the_start_of_a_message() {
        let cut = |s: &str| request_id(s.as_bytes());
        assert_eq!(
            cut(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"xxx"#),
            json!(7)
        );
        assert_eq!(cut(r#" { "id" : "req-1" , "method": "x""#), json!("req-1"));
        // After nested values and strings with quotes and braces in them.
        assert_eq!(
            cut(r#"{"method":"m","params":{"s":"a\"}{[","n":[1,{"id":3}]},"id":-4,"x":"#),
            json!(-4)
        );
        // An escaped key still says id.
        assert_eq!(cut(r#"{"\u0069d": 5, "params": {"#), json!(5));
        // Not found before the cut, not a request, not a valid ID.
        assert_eq!(
            cut(r#"{"jsonrpc":"2.0","params":{"content":"xxxx"#),
            Value::Null
        );
        assert_eq!(cut(r#"[{"id":1}]"#), Value::Null);
        assert_eq!(cut(r#"{"id":{"a":1}}"#), Value::Null);
        assert_eq!(cut(r#"{"id":nul"#), Value::Null);
        assert_eq!(cut(""), Value::Null);
    }

    #[tokio::test]
    async fn long_lines_are_answered_and_short_ones_pass_whole() {
        let (mut client, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, mut client_out) = tokio::io::duplex(1 << 20);
        let g = guard(server_in, server_out, Arc::new(crate::report::Silent));
        let (mut rmcp_in, rmcp_out) = (g.input, g.output);
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"params\":\"{}\"}}\n",
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        let writer = tokio::spawn(async move {
            client.write_all(b"{\"id\":1}\n").await.unwrap();
            client.write_all(big.as_bytes()).await.unwrap();
            client.write_all(b"{\"id\":2}\r\n").await.unwrap();
            client
        });
        let mut seen = vec![0u8; 64];
        let mut got = Vec::new();
        while got.len() < b"{\"id\":1}\n{\"id\":2}\r\n".len() {
            let n = rmcp_in.read(&mut seen).await.unwrap();
            got.extend_from_slice(&seen[..n]);
        }
        assert_eq!(got, b"{\"id\":1}\n{\"id\":2}\r\n");
        let client = writer.await.unwrap();
        let mut answer = Vec::new();
        while !answer.ends_with(b"\n") {
            let n = client_out.read(&mut seen).await.unwrap();
            answer.extend_from_slice(&seen[..n]);
        }
        let v: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(
            (&v["id"], &v["error"]["code"]),
            (&json!(42), &json!(-32600))
        );
        drop((client, rmcp_out, rmcp_in));
        g.writer.await.unwrap();
    }
}
