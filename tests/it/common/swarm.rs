//! The two-node swarm of scripts/swarm.sh: its nodes, what carries a state directory's labels there, and the container of a service's task.

use super::*;

/// The manager's client (this machine's daemon; the test bed of scripts/swarm.sh).
pub(crate) fn swarm_manager() -> Command {
    let mut c = Command::new("docker");
    c.env_remove("DOCKER_HOST").env_remove("DOCKER_CONTEXT");
    c
}

/// The worker's daemon of the test bed (`H9TEST_SWARM_WORKER`, which scripts/swarm.sh prints).
pub(crate) fn swarm_worker() -> Command {
    let mut c = swarm_manager();
    c.arg("-H").arg(
        std::env::var("H9TEST_SWARM_WORKER")
            .unwrap_or_else(|_| "unix:///run/h9-swarm/worker/docker.sock".into()),
    );
    c
}

pub(super) fn text_of(c: &mut Command) -> String {
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// IDs of the swarm's objects of `kind` (`service`, `secret`) labelled with `state_dir`.
pub(crate) fn swarm_labelled(kind: &str, state_dir: &Path) -> Vec<String> {
    let label = format!("label=h9sandbox.state_dir={}", state_dir.display());
    text_of(swarm_manager().args([kind, "ls", "-q", "--filter", &label]))
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The container of the one task of swarm service `service`, and a client of the daemon of the
/// node it runs on (the manager's or the worker's): what a test reads back with `docker
/// inspect`. Panics when the service has no task with a container.
#[track_caller]
pub(crate) fn swarm_container(service: &str) -> (Command, String) {
    let tasks = text_of(swarm_manager().args(["service", "ps", "-q", "--no-trunc", service]));
    let task = tasks
        .lines()
        .next()
        .unwrap_or_else(|| panic!("service {service} has no task"));
    let found = text_of(swarm_manager().args([
        "inspect",
        "--type",
        "task",
        "--format",
        "{{.NodeID}} {{.Status.ContainerStatus.ContainerID}}",
        task,
    ]));
    let (node, container) = found
        .split_once(' ')
        .filter(|(_, c)| !c.is_empty())
        .unwrap_or_else(|| panic!("task {task} of service {service} has no container: {found:?}"));
    let manager = text_of(swarm_manager().args(["info", "--format", "{{.Swarm.NodeID}}"]));
    let daemon = if node == manager {
        swarm_manager()
    } else {
        swarm_worker()
    };
    (daemon, container.to_string())
}
