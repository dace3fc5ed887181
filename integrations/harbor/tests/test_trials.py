"""Real Harbor trials of tasks/count-lines, end to end (`harbor trial start`), with Harbor's
reference-solution agent (`oracle`: the task's solution/solve.sh, no model) and its agent that
does nothing (`nop`), each in h9sandbox and in Harbor's own docker environment: the rewards
must come out the same (1 and 0), with no exception."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import TASK, harbor_cli

ENVIRONMENTS = {
    "h9sandbox": "h9sandbox_harbor:H9SandboxEnvironment",
    "docker": "docker",
}


def run_trial(trials: Path, environment: str, agent: str, env: dict[str, str]) -> dict:
    name = f"{environment}-{agent}"
    cmd = [
        harbor_cli(),
        "trial",
        "start",
        "-p",
        str(TASK),
        "-a",
        agent,
        "-e",
        ENVIRONMENTS[environment],
        "--trials-dir",
        str(trials),
        "--trial-name",
        name,
    ]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    result_path = trials / name / "result.json"
    assert result_path.exists(), f"{cmd}: no result\n{run.stdout}\n{run.stderr}"
    result = json.loads(result_path.read_text())
    assert result["exception_info"] is None, (
        f"{environment}/{agent}: {result['exception_info']}\n"
        + (trials / name / "trial.log").read_text()
    )
    return result


@pytest.mark.parametrize(("agent", "expected"), [("oracle", 1.0), ("nop", 0.0)])
def test_the_reward_is_the_docker_environments(
    tmp_path: Path, agent: str, expected: float, docker_compose_env: dict[str, str]
) -> None:
    rewards = {}
    for environment in ENVIRONMENTS:
        result = run_trial(tmp_path, environment, agent, docker_compose_env)
        rewards[environment] = result["verifier_result"]["rewards"]["reward"]
    assert rewards == {"h9sandbox": expected, "docker": expected}, rewards
