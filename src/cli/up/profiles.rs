//! Which node agents `caldera up` starts, and with which flags.
//!
//! Without real GPUs the embedded default simulates two machines whose sum can
//! host the seed's example request as written (4 x A100 80 GB, 32 cores,
//! 256 GB memory, 200 GB disk) and shows a mixed pool: node-1 is an
//! 8 x A100-80GB box, node-2 a 4 x T4 + 2 x A10 box. Further nodes repeat the
//! two shapes. With real GPUs, node-1 reports the machine as it is and the
//! others stay simulated, so the pool is still heterogeneous.
use std::path::Path;

/// One node agent to run: its name, its arguments after the binary, and the
/// join token, which travels in the agent's environment
/// (`CALDERA_JOIN_TOKEN`) rather than its argv, where `ps` would show it to
/// every user of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlan {
    pub name: String,
    pub args: Vec<String>,
    pub join_token: String,
}

/// Simulated hardware: GPUs, CPU cores, memory GB, disk GB.
const LARGE: (&str, u32, u32, u32) = ("8xA100-80GB", 96, 1024, 4096);
const MIXED: (&str, u32, u32, u32) = ("4xT4-16GB,2xA10-24GB", 64, 512, 2048);

/// The agents to start: `count` of them, named node-1..node-N, each with its
/// own data directory under `<data_dir>/nodes/`.
pub fn agent_plans(
    count: u32,
    server_url: &str,
    join_token: &str,
    data_dir: &Path,
    real_gpus: bool,
) -> Vec<AgentPlan> {
    (1..=count)
        .map(|n| {
            let name = format!("node-{n}");
            let node_dir = data_dir.join("nodes").join(&name);
            let mut args: Vec<String> = vec![
                "node".into(),
                "--join".into(),
                server_url.into(),
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                node_dir.to_string_lossy().into_owned(),
                // Local agents serve their weight caches to each other, so
                // a model reaches N of them with one origin read.
                "--peer-listen".into(),
                "127.0.0.1:0".into(),
            ];
            if !(real_gpus && n == 1) {
                let (gpus, cores, memory_gb, disk_gb) = if n % 2 == 1 { LARGE } else { MIXED };
                args.extend([
                    "--simulate-gpus".into(),
                    gpus.into(),
                    "--simulate-cpu-cores".into(),
                    cores.to_string(),
                    "--simulate-memory-gb".into(),
                    memory_gb.to_string(),
                    "--simulate-disk-gb".into(),
                    disk_gb.to_string(),
                ]);
            }
            AgentPlan {
                name,
                args,
                join_token: join_token.to_string(),
            }
        })
        .collect()
}

/// Whether this machine has NVIDIA GPUs: a device node, or `nvidia-smi -L`
/// listing at least one GPU (covers containers where /dev is not yet populated
/// the usual way).
pub fn real_gpus_present() -> bool {
    if Path::new("/dev/nvidia0").exists() {
        return true;
    }
    std::process::Command::new("nvidia-smi")
        .arg("-L")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).contains("GPU"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag<'a>(plan: &'a AgentPlan, name: &str) -> Option<&'a str> {
        let i = plan.args.iter().position(|a| a == name)?;
        plan.args.get(i + 1).map(String::as_str)
    }

    #[test]
    fn without_gpus_both_default_nodes_are_simulated_with_their_shapes() {
        let plans = agent_plans(2, "http://127.0.0.1:7070", "jt", Path::new("/d"), false);
        assert_eq!(plans.len(), 2);
        assert_eq!(
            plans[0].args[..3],
            ["node", "--join", "http://127.0.0.1:7070"]
        );
        assert_eq!(flag(&plans[0], "--name"), Some("node-1"));
        assert_eq!(flag(&plans[0], "--token"), None, "the token is not in argv");
        assert_eq!(plans[0].join_token, "jt");
        assert_eq!(flag(&plans[0], "--data-dir"), Some("/d/nodes/node-1"));
        assert_eq!(flag(&plans[0], "--peer-listen"), Some("127.0.0.1:0"));
        assert_eq!(flag(&plans[0], "--simulate-gpus"), Some("8xA100-80GB"));
        assert_eq!(flag(&plans[0], "--simulate-cpu-cores"), Some("96"));
        assert_eq!(flag(&plans[0], "--simulate-memory-gb"), Some("1024"));
        assert_eq!(flag(&plans[0], "--simulate-disk-gb"), Some("4096"));
        assert_eq!(
            flag(&plans[1], "--simulate-gpus"),
            Some("4xT4-16GB,2xA10-24GB")
        );
        assert_eq!(flag(&plans[1], "--simulate-memory-gb"), Some("512"));
    }

    #[test]
    fn with_real_gpus_node_1_reports_the_machine_as_it_is() {
        let plans = agent_plans(3, "http://h:1", "jt", Path::new("/d"), true);
        assert_eq!(flag(&plans[0], "--simulate-gpus"), None);
        assert_eq!(
            flag(&plans[1], "--simulate-gpus"),
            Some("4xT4-16GB,2xA10-24GB")
        );
        assert_eq!(flag(&plans[2], "--simulate-gpus"), Some("8xA100-80GB"));
    }
}
