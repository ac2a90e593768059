//! The one change k8sm-testcluster makes to KWOK (v0.8.0) before building it: a UID precondition on
//! the delete that finishes a terminating pod. By name alone, a delete queued for a StatefulSet's
//! old pod can land on its same-named replacement and queue the next, each loss looking like an SLA
//! violation (bench/results/README.md); now a stale delete fails with a 409 KWOK does not retry.
//! The module cache is read-only and `go build -overlay` refuses files beneath it, so the pinned
//! module is copied, patched, and substituted by a `replace` in a private copy of the pin's go.mod.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::error::{io, read};

const PATCHED_FILE: &str = "pkg/kwok/controllers/pod_controller.go";
const STALE_DELETE: &str = "Delete(ctx, pod.Name, deleteOpt)";
const UID_DELETE: &str = "Delete(ctx, pod.Name, podDeleteOptions(pod))";
const ADDED_FILE: &str = "pkg/kwok/controllers/k8sm_pod_delete_uid.go";
const ADDED_SOURCE: &str = include_str!("kwok_patch/pod_delete_uid.go");

/// Everything that defines the patch, hashed into KWOK's cache key so a changed patch rebuilds
/// KWOK.
pub(crate) const FINGERPRINT: &[&str] = &[
    PATCHED_FILE,
    STALE_DELETE,
    UID_DELETE,
    ADDED_FILE,
    ADDED_SOURCE,
];

/// Copies the KWOK module at `source` into `work/kwok`, patches it, and writes `work/go.mod` and
/// `work/go.sum`: the pin module's own, plus a `replace` pointing at the copy. Returns the go.mod
/// to pass to `go build -modfile`.
pub(crate) fn prepare(pin_module: &Path, source: &Path, work: &Path) -> Result<PathBuf, Error> {
    let patched = work.join("kwok");
    copy_tree(source, &patched)?;

    let file = patched.join(PATCHED_FILE);
    let original = read(&file)?;
    if original.matches(STALE_DELETE).count() != 1 {
        return Err(Error::Setup(format!(
            "{} no longer contains `{STALE_DELETE}` exactly once: the KWOK pin changed, so the patch in \
             crates/testcluster/src/kwok_patch.rs must be checked against the new version",
            source.join(PATCHED_FILE).display()
        )));
    }
    // Copied module files keep the cache's read-only mode; replace the file rather than write
    // through it.
    remove(&file)?;
    write(&file, &original.replacen(STALE_DELETE, UID_DELETE, 1))?;
    write(&patched.join(ADDED_FILE), ADDED_SOURCE)?;

    let go_mod = read(&pin_module.join("go.mod"))?;
    let modfile = work.join("go.mod");
    write(
        &modfile,
        &format!(
            "{go_mod}\n// Added by k8sm-testcluster: KWOK with a UID precondition on pod deletion.\nreplace sigs.k8s.io/kwok => {}\n",
            patched.display()
        ),
    )?;
    write(&work.join("go.sum"), &read(&pin_module.join("go.sum"))?)?;
    Ok(modfile)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(|e| io(format!("creating {}", to.display()), e))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| io(format!("listing {}", from.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io(format!("listing {}", from.display()), e))?;
        let kind = entry
            .file_type()
            .map_err(|e| io(format!("inspecting {}", entry.path().display()), e))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| io(format!("copying {}", entry.path().display()), e))?;
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| io(format!("writing {}", path.display()), e))
}

fn remove(path: &Path) -> Result<(), Error> {
    std::fs::remove_file(path).map_err(|e| io(format!("removing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_the_delete_and_replaces_the_module() {
        let temp = tempfile::tempdir().unwrap();
        let source = temp.path().join("kwok@v0.8.0");
        let controllers = source.join("pkg/kwok/controllers");
        std::fs::create_dir_all(&controllers).unwrap();
        std::fs::write(
            source.join(PATCHED_FILE),
            "err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)\n",
        )
        .unwrap();
        let pin = temp.path().join("pin");
        std::fs::create_dir_all(&pin).unwrap();
        std::fs::write(pin.join("go.mod"), "module example/pin\n").unwrap();
        std::fs::write(pin.join("go.sum"), "").unwrap();

        let work = temp.path().join("work");
        let modfile = prepare(&pin, &source, &work).unwrap();

        let patched = std::fs::read_to_string(work.join("kwok").join(PATCHED_FILE)).unwrap();
        assert!(patched.contains(UID_DELETE), "{patched}");
        assert!(!patched.contains(STALE_DELETE), "{patched}");
        assert!(work.join("kwok").join(ADDED_FILE).exists());
        let go_mod = std::fs::read_to_string(modfile).unwrap();
        assert!(
            go_mod.contains(&format!(
                "replace sigs.k8s.io/kwok => {}",
                work.join("kwok").display()
            )),
            "{go_mod}"
        );
        // The source, standing in for the module cache, is untouched.
        let original = std::fs::read_to_string(source.join(PATCHED_FILE)).unwrap();
        assert!(original.contains(STALE_DELETE));
    }

    #[test]
    fn refuses_a_kwok_whose_delete_call_changed() {
        let temp = tempfile::tempdir().unwrap();
        let source = temp.path().join("kwok");
        std::fs::create_dir_all(source.join("pkg/kwok/controllers")).unwrap();
        std::fs::write(source.join(PATCHED_FILE), "Delete(ctx, pod.Name, other)\n").unwrap();
        let err = prepare(temp.path(), &source, &temp.path().join("work")).unwrap_err();
        assert!(err.to_string().contains("kwok_patch.rs"), "{err}");
    }
}
