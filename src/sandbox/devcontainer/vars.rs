//! The specification's variables (`${localWorkspaceFolder}`, `${devcontainerId}`, ...) in a
//! devcontainer.json's strings, and the references left unsubstituted (`${localEnv:…}`).

use std::path::Path;

use sha2::{Digest, Sha256};

use super::parse::hex;

/// The references of a file's strings that h9sandbox did not substitute.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// `${localEnv:…}` references, with where (`containerEnv.TOKEN: ${localEnv:TOKEN}`).
    pub(super) local_env: Vec<String>,
}

/// The variables of the specification, for a sandbox on `workdir`.
pub(super) struct Vars {
    workdir: String,
    basename: String,
    id: String,
}

impl Vars {
    pub(super) fn new(config: &Path, workdir: &Path) -> Vars {
        Vars {
            workdir: workdir.display().to_string(),
            basename: workdir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            id: hex(&Sha256::digest(config.as_os_str().as_encoded_bytes()))[..16].to_string(),
        }
    }

    /// `s` with the variables substituted (`where` names the key, for the notes);
    /// `${containerEnv:…}` and unknown variables are left as they are.
    pub(super) fn substitute(&self, s: &str, at: &str, notes: &mut Notes) -> String {
        substitute(s, |var| match var {
            "localWorkspaceFolder" | "containerWorkspaceFolder" => Some(self.workdir.clone()),
            "localWorkspaceFolderBasename" | "containerWorkspaceFolderBasename" => {
                Some(self.basename.clone())
            }
            "devcontainerId" => Some(self.id.clone()),
            v if v.starts_with("localEnv:") => {
                let mut parts = v.splitn(3, ':');
                let (_, var, default) = (parts.next(), parts.next(), parts.next());
                notes
                    .local_env
                    .push(format!("{at}: ${{localEnv:{}}}", var.unwrap_or_default()));
                Some(default.unwrap_or_default().to_string())
            }
            _ => None,
        })
    }
}

/// `s` with each `${NAME}` replaced by `lookup(NAME)`; those it returns `None` for stay.
pub(super) fn substitute(s: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let var = &after[..end];
                match lookup(var) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[start..start + 2 + end + 1]),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_leaves_unknown_variables() {
        let s = substitute("a ${x} ${y} ${z", |v| (v == "x").then(|| "X".into()));
        assert_eq!(s, "a X ${y} ${z");
    }
}
