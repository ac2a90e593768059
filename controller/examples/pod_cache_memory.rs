//! How much memory the controller's pod cache takes, measured the way the controller fills it:
//! pages of a pod list (files of a `PodList` each, as `kubectl get pods -A -o json
//! --chunk-size=500` pages split them) parsed into [`CachedPod`]s and applied to the controller's
//! pod cache as a watcher's initial list, then `VmRSS`/`VmHWM` read from `/proc/self/status`.
//! Usage: `cargo run --release -p k8sm-controller --example pod_cache_memory -- <dir of pages>`.

use std::path::PathBuf;

use k8sm_controller::CachedPod;
use k8sm_controller::pod_store;
use kube::runtime::watcher::Event;

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix(" kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn main() {
    let dir: PathBuf = std::env::args()
        .nth(1)
        .expect("a directory of PodList pages")
        .into();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("readable directory")
        .map(|e| e.expect("entry").path())
        .collect();
    pages.sort();
    let before = status_kb("VmRSS:");
    let (store, mut writer) = pod_store();
    writer.apply(&Event::Init);
    for page in &pages {
        let body = std::fs::read(page).expect("readable page");
        let list: kube::core::ObjectList<CachedPod> =
            serde_json::from_slice(&body).expect("a PodList");
        for pod in list.items {
            writer.apply(&Event::InitApply(pod));
        }
    }
    writer.apply(&Event::InitDone);
    println!(
        "{} pods cached: VmRSS {} kB (before {} kB), VmHWM {} kB",
        store.len(),
        status_kb("VmRSS:"),
        before,
        status_kb("VmHWM:")
    );
}
