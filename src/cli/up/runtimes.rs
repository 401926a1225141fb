//! Once its agents have joined, `up` says which runtime each node runs a
//! task's image in: one line for the nodes whose container runtime is up,
//! and one line saying what is missing where it is not (a task with an image
//! waits for a node with containers unless it asks for `"runtime":"process"`).
use super::super::client::ApiClient;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long `up` waits for its agents to join before it says what it knows.
const JOIN_WAIT: Duration = Duration::from_secs(20);

/// Waits (at most [`JOIN_WAIT`]) until `expected` nodes are listed, then
/// prints their runtimes. Says so in one line when they did not all join.
pub async fn report(url: &str, operator_token: &str, expected: u32) {
    if expected == 0 {
        return;
    }
    let client = ApiClient::new(url, Some(operator_token.to_string()));
    let deadline = tokio::time::Instant::now() + JOIN_WAIT;
    let mut nodes = Vec::new();
    loop {
        if let Ok(data) = client.get("/v1/nodes", &[]).await {
            nodes = data["nodes"].as_array().cloned().unwrap_or_default();
        }
        if nodes.len() >= expected as usize || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for line in lines(&nodes, expected) {
        println!("{line}");
    }
}

/// The lines [`report`] prints for the node views `nodes`.
fn lines(nodes: &[Value], expected: u32) -> Vec<String> {
    // What each node says of its container runtime: Ok(engine version) when
    // up, Err(what is missing) when not.
    let mut by_state: BTreeMap<Result<String, String>, Vec<String>> = BTreeMap::new();
    for n in nodes {
        let name = n["name"].as_str().unwrap_or("?").to_string();
        let container = n["runtimes"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["kind"] == "container"));
        let state = match container {
            Some(r) if r["up"] == true => Ok(format!(
                "{} {}",
                r["engine"].as_str().unwrap_or("podman"),
                r["version"].as_str().unwrap_or("")
            )
            .trim_end()
            .to_string()),
            Some(r) => Err(r["detail"]
                .as_str()
                .filter(|d| !d.is_empty())
                .unwrap_or("the container runtime is down")
                .to_string()),
            None => Err("the agent reports no container runtime".to_string()),
        };
        by_state.entry(state).or_default().push(name);
    }
    let mut out = Vec::new();
    for (state, names) in by_state {
        let run = if names.len() == 1 { "runs" } else { "run" };
        let names = names.join(", ");
        out.push(match state {
            Ok(engine) => format!("Runtimes: {names} {run} images in containers ({engine})."),
            Err(missing) => format!(
                "Runtimes: {names} {run} processes only: no containers ({missing}); \
                 `sudo scripts/container-host` sets up podman. Tasks with an image wait \
                 for a node with containers unless they say \"runtime\":\"process\"."
            ),
        });
    }
    if nodes.len() < expected as usize {
        out.push(format!(
            "Runtimes: {} of {expected} agents had joined after {} s; `caldera nodes --context up-operator` shows them all.",
            nodes.len(),
            JOIN_WAIT.as_secs()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nodes_are_grouped_by_what_their_container_runtime_says() {
        let up = json!({"kind": "container", "engine": "podman", "version": "4.3.1", "up": true});
        let process = json!({"kind": "process", "engine": "caldera-shim", "up": true});
        let missing = json!({"kind": "container", "engine": "podman", "up": false,
            "detail": "podman not found on PATH"});
        let nodes = [
            json!({"name": "node-0", "runtimes": [process.clone(), up.clone()]}),
            json!({"name": "node-1", "runtimes": [process.clone(), up]}),
            json!({"name": "node-2", "runtimes": [process.clone(), missing]}),
            json!({"name": "node-3", "runtimes": [process]}),
        ];
        assert_eq!(
            lines(&nodes, 4),
            [
                "Runtimes: node-0, node-1 run images in containers (podman 4.3.1).",
                "Runtimes: node-2 runs processes only: no containers (podman not found on PATH); \
                 `sudo scripts/container-host` sets up podman. Tasks with an image wait for a \
                 node with containers unless they say \"runtime\":\"process\".",
                "Runtimes: node-3 runs processes only: no containers (the agent reports no \
                 container runtime); `sudo scripts/container-host` sets up podman. Tasks with \
                 an image wait for a node with containers unless they say \"runtime\":\"process\".",
            ]
        );
    }

    #[test]
    fn agents_that_did_not_join_are_counted() {
        let nodes = [json!({"name": "node-0", "runtimes": [
            {"kind": "container", "engine": "podman", "version": "4.3.1", "up": true}]})];
        let out = lines(&nodes, 2);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(
            out[1].starts_with("Runtimes: 1 of 2 agents had joined after 20 s"),
            "{out:?}"
        );
    }
}
