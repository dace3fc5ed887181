//! Port forwarding through the MCP server: only when its operator offers it, an address that reaches the sandbox until it goes.

use super::*;

/// An MCP server on `env` with `args` after `mcp`, past its handshake: the child, its stdin,
/// and its stdout's lines (read with a bound, [`crate::mcp::answer`]).
pub(super) fn mcp_server(
    env: &TestEnv,
    args: &[&str],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<String>,
) {
    use serde_json::json;
    let mut child = env
        .cmd()
        .arg("mcp")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = crate::mcp::stdout_lines(child.stdout.take().unwrap());
    let mut send = |v: serde_json::Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "by-hand", "version": "0"}}}),
    );
    let init = crate::mcp::answer(&lines, json!(1));
    assert_eq!(init["result"]["serverInfo"]["name"], "h9sandbox", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (child, stdin, lines)
}

/// Sends request `id` (`method`, `params`) and returns its answer.
pub(super) fn mcp_request(
    stdin: &mut std::process::ChildStdin,
    lines: &std::sync::mpsc::Receiver<String>,
    id: u64,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let v = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{v}").unwrap();
    stdin.flush().unwrap();
    crate::mcp::answer(lines, serde_json::json!(id))
}

pub(super) fn tool_names(listed: &serde_json::Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn mcp_forwards_a_port_only_when_its_operator_offers_it() {
    use serde_json::json;
    let env = TestEnv::new();
    let (mut child, mut stdin, lines) = mcp_server(&env, &[]);
    let listed = mcp_request(&mut stdin, &lines, 2, "tools/list", json!({}));
    assert!(
        !tool_names(&listed).contains(&"sandbox_port_forward".to_string()),
        "{listed}"
    );
    let r = mcp_request(
        &mut stdin,
        &lines,
        3,
        "tools/call",
        json!({"name": "sandbox_port_forward", "arguments": {"port": 8000}}),
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(
        r.to_string().contains("h9sandbox mcp --port-forward"),
        "{r}"
    );
    drop(stdin);
    let out = wait_output(child_take(&mut child), Duration::from_secs(30), "mcp");
    assert!(out.status.success(), "{:?}", out.status);
}

pub(super) fn child_take(c: &mut std::process::Child) -> std::process::Child {
    std::mem::replace(c, Command::new("true").spawn().unwrap())
}

#[test]
fn mcp_port_forward_returns_an_address_that_reaches_the_sandbox_until_it_goes() {
    use serde_json::json;
    require_container!("port forwarding needs the in-container agent");
    if mounted_under_gvisor() {
        return;
    }
    let env = TestEnv::new();
    let (mut child, mut stdin, lines) = mcp_server(&env, &["--auto-up", "--port-forward"]);
    let listed = mcp_request(&mut stdin, &lines, 2, "tools/list", json!({}));
    assert!(
        tool_names(&listed).contains(&"sandbox_port_forward".to_string()),
        "{listed}"
    );
    // A tool without `id` waits for the --auto-up sandbox; then the list names it.
    let r = mcp_request(
        &mut stdin,
        &lines,
        4,
        "tools/call",
        json!({"name": "sandbox_exec", "arguments": {"command": "true"}}),
    );
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let listed = mcp_request(
        &mut stdin,
        &lines,
        5,
        "tools/call",
        json!({"name": "sandbox_list", "arguments": {}}),
    );
    let id = listed["result"]["structuredContent"]["default"]
        .as_str()
        .unwrap_or_else(|| panic!("no default sandbox after an exec: {listed}"))
        .to_string();
    serve(&env, &id, "127.0.0.1:8000", "hello over mcp\n");
    // A port nothing listens on is refused as a port number, before anything listens.
    let r = mcp_request(
        &mut stdin,
        &lines,
        6,
        "tools/call",
        json!({"name": "sandbox_port_forward", "arguments": {"port": 0}}),
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    // A privileged port of the server's machine is not the client's to take.
    let r = mcp_request(
        &mut stdin,
        &lines,
        61,
        "tools/call",
        json!({"name": "sandbox_port_forward", "arguments": {"port": 8000, "local_port": 80}}),
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(r.to_string().contains("below 1024"), "{r}");
    let r = mcp_request(
        &mut stdin,
        &lines,
        7,
        "tools/call",
        json!({"name": "sandbox_port_forward", "arguments": {"port": 8000}}),
    );
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let fwd = &r["result"]["structuredContent"];
    assert_eq!(fwd["id"], id.as_str(), "{r}");
    assert_eq!(fwd["port"], 8000, "{r}");
    let addr = fwd["address"].as_str().unwrap().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let got = http_get(&addr).expect("the forward answered");
    assert!(got.ends_with("hello over mcp\n"), "{got}");
    // ls shows it as the server's.
    let e = env.entry(&id);
    assert_eq!(e["forwards"][0]["address"], addr.as_str(), "{e}");
    assert_eq!(e["forwards"][0]["kind"], "mcp", "{e}");
    assert_eq!(e["forwards"][0]["pid"], child.id(), "{e}");
    // The sandbox goes: so does the listener (the server lives on).
    let r = mcp_request(
        &mut stdin,
        &lines,
        8,
        "tools/call",
        json!({"name": "sandbox_down", "arguments": {}}),
    );
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    wait_until(
        Duration::from_secs(20),
        "the forward ends with its sandbox",
        || TcpStream::connect(&addr).is_err(),
    );
    assert!(child.try_wait().unwrap().is_none(), "the server ended");
    drop(stdin);
    let out = wait_output(child_take(&mut child), Duration::from_secs(60), "mcp");
    assert!(out.status.success(), "{:?}", out.status);
    let reg = env.state_dir.join("forwards");
    assert!(
        !reg.exists() || std::fs::read_dir(&reg).unwrap().next().is_none(),
        "a registration was left behind"
    );
    env.assert_nothing_left("mcp port forward");
}
