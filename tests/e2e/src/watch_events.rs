//! What the tests' own watches take from each watch event: an object that changed or was deleted,
//! and the moment the first list is complete.

use kube::runtime::watcher;
use tokio::sync::oneshot;

/// The object of `event` as it changed (`false`) or as it was deleted (`true`); `None` for the
/// list's bookkeeping and for errors, which the watch retries by itself. Sends on `listed` once the
/// first list is complete.
pub fn change<K>(
    event: Result<watcher::Event<K>, watcher::Error>,
    listed: &mut Option<oneshot::Sender<()>>,
) -> Option<(K, bool)> {
    match event {
        Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
            Some((object, false))
        }
        Ok(watcher::Event::Delete(object)) => Some((object, true)),
        Ok(watcher::Event::InitDone) => {
            if let Some(listed) = listed.take() {
                let _ = listed.send(());
            }
            None
        }
        Ok(watcher::Event::Init) | Err(_) => None,
    }
}
