//! Unit tests of `exec`: captured text, sinks, the request's resolution.

use super::output::*;
use super::*;

#[test]
fn capped_text_never_splits_a_character() {
    // "é" is two bytes; a cap of 3 over "aé€" keeps "aé" and drops the cut "€".
    let full = "aé€".as_bytes();
    let c = Captured {
        bytes: full[..4].to_vec(),
        total: full.len() as u64,
        ..Default::default()
    };
    assert!(c.truncated());
    assert_eq!(c.text(), "aé");
    // Invalid bytes inside are replaced, not dropped.
    let c = Captured {
        bytes: b"a\xffb".to_vec(),
        total: 3,
        ..Default::default()
    };
    assert_eq!(c.text(), "a\u{fffd}b");
}

/// Feeds `input` in chunks of `chunk` bytes to a capture of `max` bytes (head and tail).
fn ends(input: &[u8], chunk: usize, max: usize) -> Captured {
    let mut c = Captured::default();
    let (head, tail) = Sink::CaptureEnds(max).caps().unwrap();
    for part in input.chunks(chunk) {
        c.total += part.len() as u64;
        c.keep(part, head, tail);
    }
    c
}

#[test]
fn capture_ends_keeps_the_start_and_the_end() {
    let input: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
    for chunk in [1, 3, 7, 64, 100] {
        let c = ends(&input, chunk, 10);
        assert_eq!(c.bytes, &input[..5], "chunk {chunk}");
        assert_eq!(c.tail.iter().copied().collect::<Vec<_>>(), &input[95..]);
        assert!(c.truncated());
        let (text, cut) = c.text_ends();
        assert_eq!(cut, 90);
        assert_eq!(
            text,
            "abcde\n[... 90 bytes cut here (the start and the end are kept) ...]\nrstuv"
        );
    }
    // Output that fits is kept whole, without a marker, even when it outgrew the head.
    let c = ends(b"0123456789", 4, 10);
    assert!(!c.truncated());
    assert_eq!(c.text_ends(), ("0123456789".to_string(), 0));
    let c = ends(b"0123", 1, 10);
    assert_eq!(c.text_ends(), ("0123".to_string(), 0));
    // A head-only capture keeps no tail.
    let mut c = Captured {
        total: 5,
        ..Default::default()
    };
    c.keep(b"01234", 2, 0);
    assert_eq!((c.bytes.as_slice(), c.tail.len()), (&b"01"[..], 0));
}

#[test]
fn capture_ends_never_splits_a_character() {
    // "€" is three bytes: the head's last one and the tail's first one are cut mid-way.
    let input = "€€€€xx€€€€".as_bytes(); // 26 bytes
    let c = ends(input, 5, 8);
    let (text, cut) = c.text_ends();
    assert_eq!(
        text,
        "€\n[... 20 bytes cut here (the start and the end are kept) ...]\n€"
    );
    assert_eq!(cut, 20);
    assert!(!text.contains('\u{fffd}'));
}

#[test]
fn env_needs_k_equals_v() {
    assert_eq!(
        parse_env(&["A=1=2".into()]).unwrap(),
        vec![("A".to_string(), "1=2".to_string())]
    );
    assert!(parse_env(&["A".into()]).is_err());
    assert!(parse_env(&["=1".into()]).is_err());
    assert!(parse_env(&[format!("{EXEC_MARKER_VAR}=x")]).is_err());
}

#[test]
fn cwd_stays_inside_the_workdir() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().canonicalize().unwrap();
    std::fs::create_dir(w.join("sub")).unwrap();
    for container in [false, true] {
        assert_eq!(
            resolve_cwd(&w, Some(Path::new("sub")), container).unwrap(),
            w.join("sub")
        );
        assert_eq!(
            resolve_cwd(&w, Some(&w.join("sub")), container).unwrap(),
            w.join("sub")
        );
        assert!(resolve_cwd(&w, Some(Path::new("..")), container).is_err());
        assert!(resolve_cwd(&w, Some(Path::new("missing")), container).is_err());
        // Inside the work dir lexically: checked on the host.
        std::os::unix::fs::symlink("/etc", w.join("esc")).unwrap_or(());
        assert!(resolve_cwd(&w, Some(&w.join("esc")), container).is_err());
    }
    // Elsewhere: the container's directory (never the host's), or refused for a local one.
    assert!(resolve_cwd(&w, Some(Path::new("/etc")), false).is_err());
    assert_eq!(
        resolve_cwd(&w, Some(Path::new("/etc")), true).unwrap(),
        Path::new("/etc")
    );
}

#[test]
fn the_result_shows_a_head_capture_as_its_head_and_an_ends_capture_with_its_marker() {
    let head = Captured {
        bytes: b"012".to_vec(),
        total: 10,
        ..Default::default()
    };
    let out = Outcome {
        stdout: head,
        stderr: ends(b"abcdefghij", 3, 4),
        ..Default::default()
    };
    let r = ExecResult::of(&out, false);
    assert_eq!(r.stdout, "012");
    assert_eq!(
        r.stderr,
        "ab\n[... 6 bytes cut here (the start and the end are kept) ...]\nij"
    );
    assert_eq!(
        (r.stdout_bytes, r.stderr_bytes, r.truncated),
        (10, 10, true)
    );
    assert_eq!((r.ended.as_str(), r.output), ("exited", None));
    // `output` only when asked for; its cut counts then.
    let out = Outcome {
        combined: Captured {
            bytes: b"x".to_vec(),
            total: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(!ExecResult::of(&out, false).truncated);
    let r = ExecResult::of(&out, true);
    assert_eq!((r.output.as_deref(), r.truncated), (Some("x"), true));
}
