//! What the network islands found on their interfaces, as the state file
//! keeps it: a run that crashed left its tree and masks on the interfaces,
//! and the next run needs what was there before to give them back exactly
//! (`docs/netisland.md`, "Crash safety").

use std::collections::BTreeMap;
use std::path::PathBuf;

use atoll_net::{RootQdisc, Snapshot, SteerSnapshot};
use serde::{Deserialize, Serialize};

use super::NetIslands;

/// The interfaces the network islands hold, each as it was found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedNetwork {
    /// One per interface taken over.
    pub interfaces: Vec<SavedInterface>,
    /// The classes of units made at run time (absent in state files
    /// written before they existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<super::RuntimeClass>,
}

/// One interface as it was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedInterface {
    /// The interface.
    pub interface: String,
    /// Its root qdisc's kind (`noqueue`, `pfifo_fast`, ...).
    pub root_kind: String,
    /// Its root qdisc's handle (`0:`, the kernel's default).
    pub root_handle: String,
    /// Each steering file and its exact text.
    pub steering: Vec<SavedFile>,
}

/// A file and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedFile {
    /// The file.
    pub path: PathBuf,
    /// What it held.
    pub text: String,
}

impl SavedInterface {
    fn new(interface: &str, snap: &Snapshot) -> Self {
        Self {
            interface: interface.to_string(),
            root_kind: snap.root.kind.clone(),
            root_handle: snap.root.handle.clone(),
            steering: snap
                .steer
                .files
                .iter()
                .map(|(path, text)| SavedFile {
                    path: path.clone(),
                    text: text.clone(),
                })
                .collect(),
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            root: RootQdisc {
                kind: self.root_kind.clone(),
                handle: self.root_handle.clone(),
            },
            steer: SteerSnapshot {
                files: self
                    .steering
                    .iter()
                    .map(|f| (f.path.clone(), f.text.clone()))
                    .collect(),
            },
        }
    }
}

impl NetIslands {
    /// What a previous run found on its interfaces (its state file): an
    /// interface of one of these islands that still has that run's tree is
    /// adopted at [`start`](Self::start) instead of refused.
    /// The run-time units' classes it saved are given again.
    pub fn set_saved(&mut self, saved: Option<SavedNetwork>) {
        let saved = saved.unwrap_or_default();
        self.restore_runtime_classes(saved.classes);
        self.saved = saved
            .interfaces
            .into_iter()
            .map(|i| (i.interface.clone(), i.snapshot()))
            .collect::<BTreeMap<_, _>>();
    }

    /// The interfaces held now, each as it was found, for the state file
    /// with the run-time units' classes (`None` when there is neither).
    pub fn saved_state(&self) -> Option<SavedNetwork> {
        let interfaces: Vec<SavedInterface> = self
            .ifs
            .managed()
            .filter_map(|i| self.ifs.snapshot(i).map(|s| SavedInterface::new(i, s)))
            .collect();
        let classes = self.runtime.clone();
        (!interfaces.is_empty() || !classes.is_empty()).then_some(SavedNetwork {
            interfaces,
            classes,
        })
    }
}
