//! The parameters every write of the controller carries: its field manager, so that `managedFields`
//! (and `kubectl get -o yaml --show-managed-fields`) tell which fields k8sm set, instead of a
//! generic client name.

use kube::api::{EvictParams, PatchParams, PostParams};

/// The reporting controller's name in every Event.
pub const CONTROLLER_NAME: &str = "k8sm-controller";

pub fn patch() -> PatchParams {
    PatchParams {
        field_manager: Some(CONTROLLER_NAME.to_owned()),
        ..PatchParams::default()
    }
}

pub fn post() -> PostParams {
    PostParams {
        field_manager: Some(CONTROLLER_NAME.to_owned()),
        ..PostParams::default()
    }
}

pub fn evict(delete_options: kube::api::DeleteParams) -> EvictParams {
    EvictParams {
        delete_options: Some(delete_options),
        post_options: post(),
    }
}
