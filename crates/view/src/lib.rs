//! k8sm-view: cluster objects → the planner's [`k8sm_planner::ClusterView`], and back where the
//! cluster records what the planner decided (times, deleted-node records, the objects an Event is
//! about).
//!
//! The one conversion that the controller (over its reflector stores) and the kubectl plugin (over
//! one-shot lists) share, so the plugin predicts from exactly what the controller sees, without
//! linking the controller. Plain field reads: every decision is the planner's.
#![forbid(unsafe_code)]

mod cluster_view;
mod intern;
mod meta;
mod node;
mod objects;
mod owner;
mod owner_views;
mod pdb;
mod pin;
mod pod;
mod policy;
pub mod reference;
mod resources;
pub mod time;

pub use cluster_view::from_objects;
pub use node::node_view;
pub use objects::Objects;
pub use owner::{
    REVISION_ANNOTATION, deployment_view, job_view, replica_set_view, replication_controller_view,
    stateful_set_view,
};
pub use owner_views::OwnerViews;
pub use pdb::pdb_view;
pub use pin::{node_pin, pins_of, pod_pins, volume_claim, volume_view};
pub use pod::{PodFields, PodSource, pod_view};
pub use policy::{deleted_node_record, deleted_node_status, policy_view};
pub use resources::{ContainerRequests, ResourceList, allocatable, pod_requests, requests_of};
