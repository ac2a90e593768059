//! A pass's thinking, with no I/O: the planner's view built from the caches, then the plan. The
//! loop runs it every pass on the watched caches; the replay harness runs the same on caches it
//! feeds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use k8sm_planner::{Calls, ClusterView, Plan, Planner};

use crate::memory::in_flight::{InFlight, PodWatch};
use crate::memory::sizes::Sizes;
use crate::observe::cluster_view::{self, KeptView};
use crate::observe::stores::Stores;

/// What a pass keeps for the next: the view, what the planner derived from each pod, and the
/// remembered sizes of controllers of unknown kinds.
#[derive(Default)]
pub struct Planning {
    /// The last pass's view, brought up to date by the next, which converts only the objects that
    /// changed.
    view: Arc<ClusterView>,
    kept: KeptView,
    /// Keeps what it derived from each pod for the next pass (only the pods that changed are read
    /// again).
    planner: Planner,
    pub(crate) sizes: Sizes,
    /// `--pace-by-room`.
    pace_by_room: bool,
}

/// One pass's view and plan, and how long each took.
pub struct Planned {
    /// Shared with the planning, which updates it in place at the next pass once this is dropped.
    pub view: Arc<ClusterView>,
    pub plan: Plan,
    /// Building the view from the caches.
    pub observed_in: Duration,
    /// The planner's call alone.
    pub planned_in: Duration,
}

impl Planning {
    pub fn new(pace_by_room: bool) -> Self {
        Self {
            pace_by_room,
            ..Self::default()
        }
    }

    /// A pass with nothing in flight, as the replay harness runs it, with `calls` free.
    pub fn plan(&mut self, stores: &Stores, calls: Option<Calls>, now: DateTime<Utc>) -> Planned {
        let pods = PodWatch {
            failing: false,
            delivered: None,
        };
        self.plan_with(stores, &mut InFlight::default(), pods, calls, now)
    }

    /// Builds the view from `stores`, the calls in flight (pruned of those `pods` shows answered)
    /// and the controller's `calls`, and plans.
    pub(crate) fn plan_with(
        &mut self,
        stores: &Stores,
        in_flight: &mut InFlight,
        pods: PodWatch,
        calls: Option<Calls>,
        now: DateTime<Utc>,
    ) -> Planned {
        let started = Instant::now();
        // Not copied: the last pass's `Planned` is gone by now.
        let view = Arc::make_mut(&mut self.view);
        cluster_view::build(stores, &mut self.kept, view);
        view.pace_by_room = self.pace_by_room;
        view.calls = calls;
        // Until the pod watch delivers something newer, the cache cannot show an evicted pod going:
        // its eviction stays counted.
        view.in_flight.clear();
        view.observed_sizes.clear();
        in_flight.prune(view, now, pods);
        view.in_flight = in_flight.snapshot();
        view.observed_sizes = self.sizes.observe(view, Vec::new(), now);
        let planning = Instant::now();
        let plan = self.planner.plan(view, now);
        Planned {
            view: Arc::clone(&self.view),
            plan,
            observed_in: planning - started,
            planned_in: planning.elapsed(),
        }
    }
}
