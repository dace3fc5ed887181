//! The bootstrap script that runs a devcontainer's lifecycle commands in the sandbox.

use std::path::Path;

use super::{Devcontainer, Lifecycle};
use crate::engine::shell::shell_quote;
use crate::types::Ids;

/// The bootstrap command running `dc`'s lifecycle commands in a sandbox on `workdir` whose user
/// is `user`: a POSIX shell script run as root (as every bootstrap), which links
/// `workspaceFolder` to the work dir when it lies elsewhere, enters it when it lies inside, and
/// runs each command as `user` through h9sandbox's in-container wrapper (`agent exec --user`,
/// which gives the user a home and the set-ID filter), stopping at the first that fails. Its
/// first line is a comment naming the file and the commands, which diagnostics show for it.
/// `None` when there is nothing to run.
pub(crate) fn bootstrap_script(dc: &Devcontainer, workdir: &Path, user: Ids) -> Option<String> {
    let keys: Vec<&str> = dc.lifecycle.iter().map(|(k, _)| *k).collect();
    let mut lines = vec![
        format!(
            "# the lifecycle commands of {} ({})",
            dc.config.display(),
            if keys.is_empty() {
                "workspaceFolder".to_string()
            } else {
                keys.join(", ")
            }
        ),
        "set -e".to_string(),
    ];
    let work = workdir.display().to_string();
    let mut cwd = work.clone();
    if let Some(w) = dc.workspace_folder.as_deref().filter(|w| *w != work) {
        if Path::new(w).starts_with(workdir) {
            cwd = w.to_string();
        } else {
            // Paths under it reach the work dir; an existing path of the image is left alone.
            let parent = Path::new(w).parent().unwrap_or(Path::new("/"));
            lines.push(format!(
                "if [ ! -e {w} ] && [ ! -L {w} ]; then mkdir -p {p} && ln -s {work} {w}; fi",
                w = shell_quote(w),
                p = shell_quote(&parent.display().to_string()),
                work = shell_quote(&work)
            ));
        }
    }
    if dc.lifecycle.is_empty() && lines.len() == 2 {
        return None;
    }
    lines.push(format!("cd {}", shell_quote(&cwd)));
    let run_as = |c: &Lifecycle| -> String {
        let wrapper = format!(
            "HOME= {} {} exec --user {user} --",
            crate::contract::BIN,
            crate::contract::ARG
        );
        match c {
            Lifecycle::Shell(s) => format!("{wrapper} sh -c {}", shell_quote(s)),
            Lifecycle::Argv(a) => format!(
                "{wrapper} {}",
                a.iter()
                    .map(|w| shell_quote(w))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Lifecycle::Parallel(_) => unreachable!("nested objects are refused by parse"),
        }
    };
    for (key, cmd) in &dc.lifecycle {
        lines.push(format!(
            "echo {} >&2",
            shell_quote(&format!("devcontainer: {key}"))
        ));
        match cmd {
            Lifecycle::Parallel(cmds) => {
                lines.push("s=0".into());
                for (i, (_, c)) in cmds.iter().enumerate() {
                    lines.push(format!("{} & p{i}=$!", run_as(c)));
                }
                for i in 0..cmds.len() {
                    lines.push(format!("wait $p{i} || s=$?"));
                }
                lines.push("[ \"$s\" -eq 0 ] || exit \"$s\"".into());
            }
            c => lines.push(run_as(c)),
        }
    }
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::devcontainer::tests::{dir, parse_in};

    #[test]
    fn lifecycle_commands_take_the_three_forms() {
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
                 "postStartCommand": ["echo", "it's"],
                 "onCreateCommand": "make deps && echo ok",
                 "postCreateCommand": { "a": "echo a", "b": ["echo", "b"] },
                 "updateContentCommand": "" }"#,
        )
        .unwrap();
        let keys: Vec<&str> = dc.lifecycle.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["onCreateCommand", "postCreateCommand", "postStartCommand"]
        );
        let script = bootstrap_script(
            &dc,
            &p,
            Ids {
                uid: 1000,
                gid: 1000,
            },
        )
        .unwrap();
        let base = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            script.contains(&format!(
                "ln -s {} /workspaces/{base}",
                shell_quote(&p.display().to_string())
            )),
            "{script}"
        );
        assert!(
            script.contains("HOME= /.h9sandbox/h9sandbox agent exec --user 1000:1000 -- sh -c 'make deps && echo ok'"),
            "{script}"
        );
        assert!(script.contains("-- echo 'it'\\''s'"), "{script}");
        assert!(
            script.contains("& p1=$!") && script.contains("wait $p1 || s=$?"),
            "{script}"
        );
        // Nothing to run, nothing to link: no bootstrap.
        let dc = parse_in(&p, r#"{ "image": "x" }"#).unwrap();
        assert_eq!(bootstrap_script(&dc, &p, Ids::ROOT), None);
        let e = parse_in(&p, r#"{ "image": "x", "postCreateCommand": 5 }"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`postCreateCommand` must be"), "{e}");
    }

    #[test]
    fn the_script_runs_in_sh_and_stops_at_the_first_failure() {
        // The generated script, with the wrapper replaced by `env` (same argument shape:
        // `VAR= PROG ARGS`), run by the host's sh.
        let (_d, p) = dir();
        let dc = parse_in(
            &p,
            r#"{ "image": "x", "onCreateCommand": "echo one > out.txt",
                 "postCreateCommand": { "a": "echo a >> out.txt", "b": "exit 3" },
                 "postStartCommand": "echo never >> out.txt" }"#,
        )
        .unwrap();
        let script = bootstrap_script(&dc, &p, Ids::ROOT)
            .unwrap()
            .replace("/.h9sandbox/h9sandbox agent exec --user 0:0 --", "env");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{script}");
        assert_eq!(
            std::fs::read_to_string(p.join("out.txt")).unwrap(),
            "one\na\n"
        );
    }
}
