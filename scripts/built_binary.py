"""The path of the release binary as cargo reports it (it depends on the target that
.cargo/config.toml names and on CARGO_TARGET_DIR), building it first if needed."""
import json
import subprocess


def built_binary(profile="release"):
    cmd = ["cargo", "build", "--locked", "--message-format=json-render-diagnostics"]
    if profile == "release":
        cmd.append("--release")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") \
                and m["target"]["name"] == "h9sandbox":
            return m["executable"]
    raise SystemExit("cargo reported no h9sandbox executable")


if __name__ == "__main__":
    import sys
    print(built_binary(sys.argv[1] if len(sys.argv) > 1 else "release"))
