//! What the CLI's tests share: running `switchblade` and a directory of a test's own.

// Test code: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository's root, where the commands run (as the README's examples do).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// How a run of `switchblade` ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Its standard output, which it must have printed with success (and no error).
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        self.stdout
    }

    /// Its one-line error (without `switchblade: `), which it must have ended with.
    pub fn error(self) -> String {
        assert_eq!(self.code, 1, "stdout: {}", self.stdout);
        assert!(self.stdout.is_empty(), "{}", self.stdout);
        self.stderr
            .strip_prefix("switchblade: ")
            .unwrap_or_else(|| panic!("{}", self.stderr))
            .trim_end()
            .to_owned()
    }
}

/// `switchblade ARGS` in `directory`, with `input` on its standard input.
pub fn switchblade_in(directory: &Path, args: &[&str], input: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchblade"))
        .args(args)
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// `switchblade ARGS` in the repository's root.
pub fn switchblade(args: &[&str]) -> Run {
    switchblade_in(&repo(), args, "")
}

/// A directory of this test's own, empty.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchblade-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `files` (path, text) under `dir`.
pub fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}
