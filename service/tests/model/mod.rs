//! A scripted model on loopback for the real agents' tests: one HTTP/1.1 server that speaks
//! the four wire formats the agents use (Anthropic Messages for Claude Code, OpenAI
//! Responses for Codex, Gemini `generateContent`/`streamGenerateContent` for Gemini CLI,
//! OpenAI chat completions for opencode's openai-compatible provider), streaming (SSE)
//! where the request asks for it.
//!
//! A script is a list of shell lines. A conversation request (one that offers the agent's
//! shell tool) is answered from the tool results it carries: with `n` results, the answer is
//! the call of line `n`, and after the last line a final text. The answer depends only on the
//! request, so an agent's retries and side requests (titles, summaries, routing, token
//! counts, which do not offer the shell tool) do not move the script. The tool results the
//! agent sent back, which are what the model saw, are kept.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The final answer after the last line.
pub const DONE: &str = "scripted conversation done";

/// The wire format a request speaks, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    Responses,
    Gemini,
    Chat,
}

/// Called once for each new tool result, with its index and text, before the model
/// answers: the test acts there as the user would between two calls.
pub type OnResult = Box<dyn Fn(usize, &str) + Send + Sync>;

#[derive(Default)]
struct State {
    script: Vec<String>,
    /// The longest list of tool results a request carried (the model's view).
    results: Vec<String>,
    /// Every request: method, path.
    requests: Vec<String>,
    /// Requests the mock could not read or did not know.
    errors: Vec<String>,
    /// How many results [`State::on_result`] has been called for.
    seen: usize,
    on_result: Option<Arc<OnResult>>,
    /// When the last request came.
    last: Option<std::time::Instant>,
}

/// A running model; stopped on drop.
pub struct Model {
    pub port: u16,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

impl Drop for Model {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Model {
    /// Serves `script` on a free port of 127.0.0.1.
    pub fn start(script: &[&str]) -> Model {
        Model::start_with(script, None)
    }

    /// [`Model::start`], calling `on_result` for each new tool result.
    pub fn start_with(script: &[&str], on_result: Option<OnResult>) -> Model {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State {
            script: script.iter().map(|s| s.to_string()).collect(),
            on_result: on_result.map(Arc::new),
            ..State::default()
        }));
        let (s, st) = (stop.clone(), state.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(c) = c else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(c, &st));
            }
        });
        Model { port, stop, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The tool results the model saw, in order.
    pub fn results(&self) -> Vec<String> {
        self.state.lock().unwrap().results.clone()
    }

    /// Every request, as `METHOD PATH`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How long since the last request (since the start when none came).
    pub fn quiet_for(&self, start: std::time::Instant) -> std::time::Duration {
        self.state.lock().unwrap().last.unwrap_or(start).elapsed()
    }

    /// Requests the mock could not read.
    pub fn errors(&self) -> Vec<String> {
        self.state.lock().unwrap().errors.clone()
    }
}

/// One request: method, path, body.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Result<Option<Request>, String> {
    let mut first = String::new();
    if r.read_line(&mut first).map_err(|e| e.to_string())? == 0 {
        return Ok(None);
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("/").to_string();
    let (mut len, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).map_err(|e| e.to_string())? == 0 {
            return Err("connection closed in the headers".into());
        }
        if h == "\r\n" || h == "\n" {
            break;
        }
        let (k, v) = h.split_once(':').unwrap_or((&h, ""));
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            len = v.parse().map_err(|_| format!("bad content-length {v:?}"))?;
        } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k == "content-encoding" && v != "identity" {
            return Err(format!("compressed request body ({v})"));
        }
    }
    let body = if chunked {
        read_chunked(r)?
    } else {
        let mut b = vec![0; len];
        r.read_exact(&mut b).map_err(|e| e.to_string())?;
        b
    };
    Ok(Some(Request { method, path, body }))
}

fn read_chunked(r: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        r.read_line(&mut size).map_err(|e| e.to_string())?;
        let hex = size.trim().split(';').next().unwrap_or("");
        let n = usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size {hex:?}"))?;
        let mut chunk = vec![0; n + 2];
        r.read_exact(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

/// One request a connection, answered and closed (SSE bodies end with the connection).
fn serve(c: TcpStream, st: &Mutex<State>) {
    let Ok(rc) = c.try_clone() else { return };
    let mut r = BufReader::new(rc);
    let mut w = c;
    let req = match read_request(&mut r) {
        Ok(Some(req)) => req,
        Ok(None) => return,
        Err(e) => {
            st.lock().unwrap().errors.push(e);
            let _ = write_json(&mut w, 400, &json!({"error": "bad request"}));
            return;
        }
    };
    {
        let mut s = st.lock().unwrap();
        s.requests.push(format!("{} {}", req.method, req.path));
        s.last = Some(std::time::Instant::now());
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let _ = match answer(&req, &body, st) {
        Some(Answer::Json(v)) => write_json(&mut w, 200, &v),
        Some(Answer::Sse(events)) => write_sse(&mut w, &events),
        None => write_json(&mut w, 404, &json!({"error": {"message": "not found"}})),
    };
}

enum Answer {
    Json(Value),
    /// `(event name, data)`; data is JSON or a literal such as `[DONE]`.
    Sse(Vec<(Option<&'static str>, String)>),
}

fn write_json(w: &mut TcpStream, code: u16, v: &Value) -> std::io::Result<()> {
    let b = v.to_string();
    write!(
        w,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
        b.len()
    )
}

fn write_sse(w: &mut TcpStream, events: &[(Option<&str>, String)]) -> std::io::Result<()> {
    w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")?;
    for (name, data) in events {
        if let Some(n) = name {
            writeln!(w, "event: {n}")?;
        }
        write!(w, "data: {data}\n\n")?;
    }
    w.flush()
}

fn answer(req: &Request, body: &Value, st: &Mutex<State>) -> Option<Answer> {
    let p = req.path.as_str();
    if req.method != "POST" {
        return None;
    }
    if p.contains("count_tokens") {
        return Some(Answer::Json(json!({"input_tokens": 10})));
    }
    if p.contains(":countTokens") {
        return Some(Answer::Json(json!({"totalTokens": 10})));
    }
    let wire = if p.starts_with("/v1/messages") {
        Wire::Anthropic
    } else if p.ends_with("/responses") {
        Wire::Responses
    } else if p.contains("enerateContent") {
        Wire::Gemini
    } else if p.ends_with("/chat/completions") {
        Wire::Chat
    } else {
        return None;
    };
    let (has_shell, results) = conversation(wire, body);
    let step = if has_shell {
        let n = results.len();
        let (new, hook) = {
            let mut s = st.lock().unwrap();
            let new: Vec<(usize, String)> = (s.seen..n).map(|i| (i, results[i].clone())).collect();
            s.seen = s.seen.max(n);
            if n >= s.results.len() {
                s.results = results;
            }
            (new, s.on_result.clone())
        };
        if let Some(h) = hook {
            for (i, r) in &new {
                h(*i, r);
            }
        }
        let line = st.lock().unwrap().script.get(n).cloned();
        Step::from(line, n)
    } else {
        Step::Side
    };
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    Some(match wire {
        Wire::Anthropic => anthropic(&step, body, stream),
        Wire::Responses => responses(&step),
        Wire::Gemini => gemini(&step, p.contains("alt=sse")),
        Wire::Chat => chat(&step, body, stream),
    })
}

/// What the model says next.
enum Step {
    /// Call the shell with line `n`.
    Call(usize, String),
    /// The conversation's final answer.
    Done,
    /// A side request's harmless answer.
    Side,
}

impl Step {
    fn from(line: Option<String>, n: usize) -> Step {
        match line {
            Some(l) => Step::Call(n, l),
            None => Step::Done,
        }
    }

    fn text(&self) -> &str {
        match self {
            Step::Side => "{\"next_speaker\": \"user\", \"reasoning\": \"done\"}",
            _ => DONE,
        }
    }
}

/// The shell tool's name in each wire's request, and the tool results it carries.
fn conversation(wire: Wire, b: &Value) -> (bool, Vec<String>) {
    let arr = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    match wire {
        Wire::Anthropic => {
            let shell = arr(b.get("tools")).iter().any(|t| t["name"] == "Bash");
            let res = arr(b.get("messages"))
                .iter()
                .flat_map(|m| arr(m.get("content")))
                .filter(|c| c["type"] == "tool_result")
                .map(|c| text_of(&c["content"]))
                .collect();
            (shell, res)
        }
        Wire::Responses => {
            let shell = arr(b.get("tools"))
                .iter()
                .any(|t| t["name"] == "exec_command");
            let res = arr(b.get("input"))
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| text_of(&i["output"]))
                .collect();
            (shell, res)
        }
        Wire::Gemini => {
            let shell = arr(b.get("tools"))
                .iter()
                .flat_map(|t| arr(t.get("functionDeclarations")))
                .any(|d| d["name"] == "run_shell_command");
            let res = arr(b.get("contents"))
                .iter()
                .flat_map(|c| arr(c.get("parts")))
                .filter_map(|p| p.get("functionResponse").cloned())
                .map(|f| text_of(&f["response"]["output"]))
                .collect();
            (shell, res)
        }
        Wire::Chat => {
            let shell = arr(b.get("tools"))
                .iter()
                .any(|t| t["function"]["name"] == "bash");
            let res = arr(b.get("messages"))
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| text_of(&m["content"]))
                .collect();
            (shell, res)
        }
    }
}

/// A result's text: a string, or the texts of a list of parts.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|p| match p.get("text") {
                Some(Value::String(s)) => s.clone(),
                _ => text_of(p),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

fn anthropic(step: &Step, b: &Value, stream: bool) -> Answer {
    let (block, stop) = match step {
        Step::Call(n, l) => (
            json!({"type": "tool_use", "id": format!("toolu_{n:04}"), "name": "Bash",
                   "input": {"command": l, "description": "scripted step"}}),
            "tool_use",
        ),
        _ => (json!({"type": "text", "text": step.text()}), "end_turn"),
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    let msg = json!({"id": "msg_mock", "type": "message", "role": "assistant", "model": b["model"],
        "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage});
    if !stream {
        return Answer::Json(msg);
    }
    let mut start = msg.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let (open, delta) = if block["type"] == "tool_use" {
        let mut open = block.clone();
        open["input"] = json!({});
        let d = json!({"type": "input_json_delta", "partial_json": block["input"].to_string()});
        (open, d)
    } else {
        let d = json!({"type": "text_delta", "text": block["text"]});
        (json!({"type": "text", "text": ""}), d)
    };
    Answer::Sse(vec![
        (Some("message_start"), json!({"type": "message_start", "message": start}).to_string()),
        (Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": open}).to_string()),
        (Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": delta}).to_string()),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 0}).to_string()),
        (Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}).to_string()),
        (Some("message_stop"), json!({"type": "message_stop"}).to_string()),
    ])
}

/// Codex asks for a stream always.
fn responses(step: &Step) -> Answer {
    let item = match step {
        Step::Call(n, l) => json!({"type": "function_call", "id": format!("fc_{n}"),
            "call_id": format!("call_{n}"), "name": "exec_command",
            "arguments": json!({"cmd": l}).to_string()}),
        _ => json!({"type": "message", "role": "assistant", "id": "msg_mock",
            "content": [{"type": "output_text", "text": step.text()}]}),
    };
    let usage = json!({"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
        "output_tokens_details": null, "total_tokens": 15});
    Answer::Sse(vec![
        (
            Some("response.created"),
            json!({"type": "response.created", "response": {"id": "resp_mock"}}).to_string(),
        ),
        (
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item})
                .to_string(),
        ),
        (
            Some("response.completed"),
            json!({"type": "response.completed", "response": {"id": "resp_mock", "usage": usage}})
                .to_string(),
        ),
    ])
}

fn gemini(step: &Step, sse: bool) -> Answer {
    let part = match step {
        Step::Call(_, l) => json!({"functionCall": {"name": "run_shell_command",
            "args": {"command": l, "description": "scripted step"}}}),
        _ => json!({"text": step.text()}),
    };
    let resp = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "mock"});
    if sse {
        Answer::Sse(vec![(None, resp.to_string())])
    } else {
        Answer::Json(resp)
    }
}

fn chat(step: &Step, b: &Value, stream: bool) -> Answer {
    let (msg, fin) = match step {
        Step::Call(n, l) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                "id": format!("call_{n}"), "type": "function", "function": {"name": "bash",
                "arguments": json!({"command": l, "description": "scripted step"}).to_string()}}]}),
            "tool_calls",
        ),
        _ => (json!({"role": "assistant", "content": step.text()}), "stop"),
    };
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    if !stream {
        return Answer::Json(json!({"id": "chatcmpl-mock", "object": "chat.completion",
            "created": 1, "model": b["model"],
            "choices": [{"index": 0, "message": msg, "finish_reason": fin}], "usage": usage}));
    }
    let chunk = |choice: Value, usage: Option<&Value>| {
        let mut c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
            "created": 1, "model": b["model"], "choices": [choice]});
        if let Some(u) = usage {
            c["usage"] = u.clone();
        }
        (None, c.to_string())
    };
    Answer::Sse(vec![
        chunk(
            json!({"index": 0, "delta": msg, "finish_reason": null}),
            None,
        ),
        chunk(
            json!({"index": 0, "delta": {}, "finish_reason": fin}),
            Some(&usage),
        ),
        (None, "[DONE]".into()),
    ])
}
