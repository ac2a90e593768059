//! Build script of the k8sm binaries: the git commit they are built from, as `K8SM_COMMIT`
//! ("unknown" outside a git checkout), so that `--version` names it and the benchmark can check
//! that binaries are of the commit it reports.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=K8SM_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit on the
    // branch).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={git_dir}/{head_ref}");
        }
        println!("cargo:rerun-if-changed={git_dir}/packed-refs");
    }
}
